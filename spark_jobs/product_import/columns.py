"""The catalogue's columns: what every input row must have, and what each import message
carries as its payload (the function app's ImportProduct reads these names)."""

FIELDS = ("sku", "name", "price", "currency", "description")
