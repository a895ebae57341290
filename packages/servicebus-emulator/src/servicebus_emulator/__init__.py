"""A Docker-free Azure Service Bus emulator: an AMQP 1.0 server that the unmodified
azure-servicebus SDK talks to (``UseDevelopmentEmulator=true``). See README.md beside this file."""
