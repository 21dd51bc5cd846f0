"""Looking at cassettes: `replay show` and `replay play` (`describe`), `check`, `diff` (events
lined up by `align`, drawn by `diff_text`), `report` (HTML, with `report_svg`, `report_growth`,
`report_table`), the timing figures of a stream (`timing`: ttfb, ttft, gaps, tokens/s),
what a speed policy will play (`played`: `show --timeline --speed`) and a WebSocket
conversation's frames as they show and compare (`frames_view`).
"""
