"""The operator console, served by the function app at ``/console`` (see
``docs/console.md``): ``frame`` lets people in and serves the assets, ``pages`` renders what
the services read, ``actions`` carries out what operators decide."""

from . import actions, bulk, frame, pages

BLUEPRINTS = (frame.bp, pages.bp, actions.bp, bulk.bp)
