// The Service Bus namespace and the session-enabled task queues. Local (SAS) auth is off: only
// Entra identities with a data role can send or receive.
param name string
param location string
param tags object = {}
@allowed(['Standard', 'Premium'])
param sku string = 'Standard'
// Premium's capacity (docs/capacity.md): units per partition, and partitions (set at creation).
@allowed([1, 2, 4, 8, 16])
param messagingUnitsPerPartition int = 1
@allowed([1, 2, 4])
param partitions int = 1
param queueNames array

resource namespace 'Microsoft.ServiceBus/namespaces@2022-10-01-preview' = {
  name: name
  location: location
  tags: tags
  sku: {
    name: sku
    tier: sku
    capacity: sku == 'Premium' ? messagingUnitsPerPartition * partitions : null
  }
  properties: {
    premiumMessagingPartitions: sku == 'Premium' ? partitions : null
    disableLocalAuth: true
    minimumTlsVersion: '1.2'
  }
}

resource queues 'Microsoft.ServiceBus/namespaces/queues@2022-10-01-preview' = [for queueName in queueNames: {
  parent: namespace
  name: queueName
  properties: {
    requiresSession: true
    // The app gives up on a transient failure by time (each pipeline's retry window), waiting
    // inside the invocation; a message is handed back (one delivery) only after an invocation
    // held it TASK_HOLD_SECONDS. MaxDeliveryCount is left for a long manual pause (about 4
    // hours at 5 minutes a delivery) and for a task that kills its worker every time.
    maxDeliveryCount: 50
    // A task (a PDF, an SMTP send, a table batch) finishes well inside a minute; the
    // Functions host renews the session lock while it runs, and the app while it waits.
    lockDuration: 'PT1M'
    // Message ids are deterministic per order/import row, so a re-run Spark job (hours
    // later) sends no task twice.
    requiresDuplicateDetection: true
    duplicateDetectionHistoryTimeWindow: 'P1D'
    deadLetteringOnMessageExpiration: true
    defaultMessageTimeToLive: 'P14D'
  }
}]

output name string = namespace.name
output fullyQualifiedNamespace string = '${namespace.name}.servicebus.windows.net'
// The session queues, each with a trigger the scale controller sizes (rbac/servicebus-role.bicep).
output queueNames array = queueNames
