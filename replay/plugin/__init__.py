"""The pytest plugin: options, the marker and fixtures (`hooks`), the run's watcher (`run`), what
a failed test's report adds (`failure`) and the terminal summary (`summary`).

The plugin holds no logic the library lacks and imports the library only when a test needs it.
"""
