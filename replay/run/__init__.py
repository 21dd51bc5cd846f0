"""`replay record` and `replay run`: a program's whole life inside a session (`child`), through
a `sitecustomize` in `site` that every Python process of the program runs; the parts a killed
run left (`site.parts`), signals and the program's death (`supervise`), progress counted in the
program (`progress`) and the status line and summary (`report`).
"""
