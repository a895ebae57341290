"""Tools that run the local stack (Azurite, the Service Bus emulator) for tests and demos."""
