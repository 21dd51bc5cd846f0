"""What never reaches a file, a message or a repr.

`redactor` (`Redactor`: headers, query, form and JSON fields named like credentials, values
shaped like well-known keys, configured names, the `before_record` hook), `urls` (the URL's
user information and credentials in its query, in header values too), `shapes` (what a
credential's name and a key's value look like; imported by `replay.model`'s reprs, so it
imports nothing of replay's), `deep_json` (JSON read and written at any depth) and
`eventstream` (the JSON payloads of an AWS event stream's messages, re-encoded with fresh
CRCs).
"""
