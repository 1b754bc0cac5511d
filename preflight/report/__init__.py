"""Reports: the terminal's table and verdict line (from the judgement), and the files, every one
made from the JSON document, never the live run, so a saved report renders the same later
(jsonreport, junit, markdown, html). summary and units hold what they share."""
