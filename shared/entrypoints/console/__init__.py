"""The operator console, served by the function app at ``/console`` (see
``docs/console.md``): server-rendered pages over the failed sessions, orders and imports.

The bindings: ``frame`` lets people in and serves the assets, ``pages`` and ``jobs`` (every
pipeline's jobs) render what the services read, ``actions`` and ``bulk`` carry out what
operators decide. Beside them, without ``azure.functions``: ``access`` decides who may use
the console, ``views`` shapes what the
services return into what the templates show, ``render`` turns the templates into HTML
(escaped by default)."""

from . import actions, bulk, frame, jobs, pages, records

BLUEPRINTS = (frame.bp, pages.bp, jobs.bp, actions.bp, bulk.bp, records.bp)
