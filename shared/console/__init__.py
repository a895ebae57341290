"""The operator console: server-rendered pages over the failed sessions, orders and imports.

``access`` decides who may use it, ``render`` turns templates into HTML (escaped by default),
``pages`` shapes what the services return into what the templates show. The binding
(``shared.entrypoints.console``) calls the services and maps their errors to pages.
"""
