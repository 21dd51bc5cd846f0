"""The pytest plugin: options, the marker and fixtures (`hooks`), the run's watcher (`run`) and
its terminal summary (`summary`).

The plugin holds no logic the library lacks and imports the library only when a test needs it.
"""
