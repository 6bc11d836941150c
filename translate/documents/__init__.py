"""Documents translated with their structure: a file read into the texts to translate (a
paragraph, a table cell, a subtitle cue, a catalogue message; `Document.texts`), and written
again with each text replaced by its translation, everything else as it was (`Document.render`).

Inline formatting within a text (a bold run, a link, XLIFF's `<g>` and `<ph>`) is written in it
as tags (`inline`), which the search carries as protected spans: a sentence split across three
runs is translated as one sentence. Each format is a module of its own (`formats` lists them);
archives and XML are read through `safe`, with their sizes bounded and no entity, DTD or path
outside the archive followed.

Imports decode/ (`translating`: the pipeline's Translation), text/ and the ground, lxml, polib,
srt and markdown-it-py; never serve/, train/, Lightning or torchmetrics.
"""
