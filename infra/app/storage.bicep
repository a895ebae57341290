// The app's storage account: host storage (AzureWebJobsStorage), the app tables, the receipt and
// dead-letter containers, the replay queue and the Flex deployment container. Shared keys off.
param name string
param location string
param tags object = {}
param containers array
param tables array
param queues array
// Geo-redundant by default: once the archive timer completes a dead letter, its row in the
// deadletters table is the only copy of that message, and replay depends on it.
@allowed(['Standard_GRS', 'Standard_RAGRS', 'Standard_GZRS', 'Standard_RAGZRS', 'Standard_ZRS', 'Standard_LRS'])
param skuName string = 'Standard_GRS'

resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  //checkov:skip=CKV_AZURE_35: Flex Consumption without VNet integration has no fixed outbound addresses, so a deny-by-default firewall would cut off the app; shared keys are off, so only Entra identities with a data role get in (a private endpoint is the VNet variant's job).
  //checkov:skip=CKV_AZURE_59: same reason as CKV_AZURE_35: the public endpoint stays, keyless and with no anonymous blob access (allowBlobPublicAccess false).
  name: name
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: { name: skuName }
  properties: {
    accessTier: 'Hot'
    allowBlobPublicAccess: false
    allowSharedKeyAccess: false
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    publicNetworkAccess: 'Enabled'
    networkAcls: {
      bypass: 'AzureServices'
      defaultAction: 'Allow'
    }
  }

}

resource blobService 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' = {
  parent: storage
  name: 'default'
  properties: {
    deleteRetentionPolicy: { enabled: true, days: 7 }
  }
}

resource blobContainers 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = [for container in containers: {
  parent: blobService
  name: container
  properties: { publicAccess: 'None' }
}]

resource tableService 'Microsoft.Storage/storageAccounts/tableServices@2023-05-01' = {
  parent: storage
  name: 'default'
}

resource appTables 'Microsoft.Storage/storageAccounts/tableServices/tables@2023-05-01' = [for table in tables: {
  parent: tableService
  name: table
}]

resource queueService 'Microsoft.Storage/storageAccounts/queueServices@2023-05-01' = {
  parent: storage
  name: 'default'
}

resource storageQueues 'Microsoft.Storage/storageAccounts/queueServices/queues@2023-05-01' = [for queue in queues: {
  parent: queueService
  name: queue
}]

output name string = storage.name
