"""``make demo``: the whole story of the app on this machine, in about two minutes.

It starts the stack (Azurite, the Service Bus emulator, the Communication Services Email
stand-in, an SMTP sink and the local Functions host running function_app.py), imports a
product catalogue with the Spark job, submits a batch of orders of which some are designed to
fail, lets the archive timer move the dead letters, reports what happened through the HTTP
API, then ends the payment outage and replays the sessions it broke. ``python -m
localdev.demo`` exits 0 only when everything came out as planned.
"""
