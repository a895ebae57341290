// Storage data roles on the account. Blob Data Owner: the Functions host (AzureWebJobsStorage)
// and Flex deployment need it; it also covers receipts and dead-letter bodies. Queue Data
// Contributor: the replay queue and its poison queue. Table Data Contributor: the app tables.
param storageAccountName string
param principalId string
@allowed(['ServicePrincipal', 'User'])
param principalType string

var roles = {
  blobOwner: 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b' // Storage Blob Data Owner
  queueContributor: '974c5e8b-45b9-4653-ba55-5f855dd0fb88' // Storage Queue Data Contributor
  tableContributor: '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3' // Storage Table Data Contributor
}

resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: storageAccountName
}

resource assignments 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for role in items(roles): {
  name: guid(storage.id, principalId, role.value)
  scope: storage
  properties: {
    principalId: principalId
    principalType: principalType
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', role.value)
  }
}]
