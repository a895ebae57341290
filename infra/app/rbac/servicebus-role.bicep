// Service Bus data roles on the namespace: receive the task queues, and send (the HTTP order
// endpoint, the next task of a pipeline, replays).
param namespaceName string
param principalId string
@allowed(['ServicePrincipal', 'User'])
param principalType string

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
