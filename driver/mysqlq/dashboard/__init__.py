"""``mysqlq dashboard``: a web page of the queue's state, read-only unless asked otherwise.

Needs the ``dashboard`` extra (``pip install 'mysqlq[dashboard]'``: Starlette, uvicorn, Jinja2).
The modules, imports running one way (top to bottom):

    server     uvicorn: serve in the foreground, or ``Running`` in a thread
    app        the Starlette application: routes, forms, error pages
    flow       the pause and resume pages (confirmation and form), for ``app``
    inputs     query parameters and form fields, checked (400 pages)
    gate       Host, Origin, path prefix, token, security headers (before every request)
    pages      each page's figures: reader rows + history rates and charts
    actions    redrive, seek, pause and resume through mysqlq.Client (only with --allow-actions)
    reader     read-only connections and the queries of ``sql``
    history    the in-memory history and its sampler thread
    views      formatting: ages, rates, SVG chart points, payload views
    security   host, origin, token, session, wrong-token and CSRF checks
    settings   the options, checked (no web framework imported)

Importing this package imports none of them.
"""

EXTRA_HINT = "pip install 'mysqlq[dashboard]'"
