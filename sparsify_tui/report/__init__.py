"""Project reports: one file a user can attach to a ticket (issue 16).

* :mod:`.model`: the typed report (:class:`~sparsify_tui.report.model.Report`) and the builders that turn typed
  profiles, optimization records and benchmark results into its entries (plain data in, typed data out);
* :mod:`.svg`: horizontal bar charts as inline SVG (no dependency, no external asset);
* :mod:`.render`: Markdown (tables, with text bars), self-contained HTML (inline CSS and SVG charts: no network,
  no script, no external file) and JSON.

The workspace is read by :func:`sparsify_tui.services.report.build_report`; this package never imports the store,
the jobs or the UI.
"""
