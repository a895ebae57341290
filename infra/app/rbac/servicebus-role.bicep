// Service Bus data roles on the namespace: receive the task queues, and send (the HTTP order
// endpoint, the next task of a pipeline, replays).
param namespaceName string
param principalId string
@allowed(['ServicePrincipal', 'User'])
param principalType string
// The queues whose triggers the scale controller sizes from their message counts (the app's
// identity only). Target-based scaling reads each queue's runtime properties
// (ServiceBusMetricsProvider.GetQueueMetricsAsync calls GetQueueRuntimePropertiesAsync in
// Azure/azure-sdk-for-net, sdk/servicebus/Microsoft.Azure.WebJobs.Extensions.ServiceBus); that
// needs Manage rights, and with Listen rights only it "reverts to incremental scale"
// (learn.microsoft.com/azure/azure-functions/functions-target-based-scaling, Service Bus queues
// and topics). Data Owner is the one built-in data role with Manage: it is granted on these
// queues alone, never on the namespace.
param scaledQueueNames array = []

var manage = '090c5cfd-751d-490a-894a-3ce6f1109419' // Azure Service Bus Data Owner

var roles = {
  receiver: '4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0' // Azure Service Bus Data Receiver
  sender: '69a216fc-b8fb-44d8-bc22-1f3c2cd27a39' // Azure Service Bus Data Sender
}

resource namespace 'Microsoft.ServiceBus/namespaces@2022-10-01-preview' existing = {
  name: namespaceName
}

resource assignments 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for role in items(roles): {
  name: guid(namespace.id, principalId, role.value)
  scope: namespace
  properties: {
    principalId: principalId
    principalType: principalType
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', role.value)
  }
}]

resource scaledQueues 'Microsoft.ServiceBus/namespaces/queues@2022-10-01-preview' existing = [for queueName in scaledQueueNames: {
  parent: namespace
  name: queueName
}]

resource scaleAssignments 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for (queueName, i) in scaledQueueNames: {
  name: guid(scaledQueues[i].id, principalId, manage)
  scope: scaledQueues[i]
  properties: {
    principalId: principalId
    principalType: principalType
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', manage)
  }
}]
