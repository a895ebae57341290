// Everything the app needs in Azure, keyless: the Function App reaches Service Bus, Storage,
// Communication Services Email and Key Vault with its user-assigned identity. `azd up` or `az deployment sub create` deploys it.
targetScope = 'subscription'

@minLength(1)
@maxLength(64)
@description('Name of the azd environment; used in every resource name.')
param environmentName string

@minLength(1)
@description('Azure region for every resource.')
param location string

@description('Object id of the deploying developer: gets the same data roles as the app, so local runs against Azure need no keys. Empty to skip.')
param principalId string = ''

@allowed(['Standard', 'Premium'])
@description('Service Bus tier. Premium gives isolation and larger messages.')
param serviceBusSku string = 'Standard'

// docs/capacity.md: Standard carries about 1,000 operations/s per namespace (about 35 orders/s at
// the measured operations per order); past that, Premium, its units and partitions.
@allowed([1, 2, 4, 8, 16])
@description('Premium only: messaging units per partition (the namespace gets this times serviceBusPartitions).')
param serviceBusMessagingUnitsPerPartition int = 1

@allowed([1, 2, 4])
@description('Premium only, fixed when the namespace is created: partitions, each a broker of its own.')
param serviceBusPartitions int = 1

@description('Storage redundancy. Geo-redundant by default: the dead-letter archive tables are the only copy of a completed dead letter.')
@allowed(['Standard_GRS', 'Standard_RAGRS', 'Standard_GZRS', 'Standard_RAGZRS', 'Standard_ZRS', 'Standard_LRS'])
param storageSku string = 'Standard_GRS'

@description('Also deploy an Azure Databricks workspace for the Spark import job.')
param deployDatabricks bool = false

@description('The Storage queue of bulk replay requests: the value the app reads from REPLAY_QUEUE_NAME.')
param replayQueueName string = 'replay-requests'

@allowed(['acs', 'smtp'])
@description('What sends the receipts: Azure Communication Services Email (acs: repeatable sends, the app\'s identity) or an SMTP relay (smtp).')
param emailSender string = 'acs'

@description('ORDER_STEP_ROWS: also record each order\'s end as the step row that releases before it read; true only while such a release runs beside it during a deploy (docs/deploy.md, "The upgrade procedure").')
param orderStepRows bool = false

@description('Where Communication Services keeps its data at rest (its Email service must share it).')
param emailDataLocation string = 'United States'

@description('The receipts\' sender. Empty: the DoNotReply address of the Azure-managed domain.')
param receiptEmailFrom string = ''

@description('SMTP relay for receipts (emailSender smtp). The credentials go to Key Vault, never to app settings.')
param smtpHost string = 'smtp.example.com'
param smtpPort string = '587'
param smtpStartTls string = 'true'
@secure()
param smtpUsername string = ''
@secure()
param smtpPassword string = ''

@description('Client id of the Entra app registration that signs people in to the operator console (App Service Authentication on /console; docs/console.md). Empty (and createConsoleApp false): no one can open the console in Azure.')
param consoleAuthClientId string = ''

@description('Make the console\'s app registration here, with its app roles (app/console-app.bicep; the deploying user needs Application.ReadWrite.All), instead of giving consoleAuthClientId.')
param createConsoleApp bool = false

@description('KEY_ROLES: <role>=<SHA-256 hex of a function key> pairs, the roles of the API\'s keys (docs/console.md, "Roles").')
param keyRoles string = ''

@description('Where the API\'s absolute URLs start (a custom domain, Front Door). Empty: the API answers with paths alone; never from a request\'s Host header.')
param publicBaseUrl string = ''

@description('Who the alerts e-mail (app/alerts.bicep). Empty: no alerts are deployed.')
param alertEmail string = ''

@allowed([5, 15, 30, 60])
@description('Minutes a dead letter may wait for the archive before the alert fires.')
param alertDeadLetterWaitMinutes int = 15

@description('Failed sessions of one pipeline in the window above which the alert fires.')
param alertFailedSessionsThreshold int = 10

@minValue(5)
@maxValue(1440)
param alertFailedSessionsWindowMinutes int = 15

var abbrs = loadJsonContent('abbreviations.json')
// What the app's pipeline declarations imply, written by `python -m localdev.derived`
// (docs/pipelines.md): the session queues and the app settings naming them, and the tables.
var appResources = loadJsonContent('app-resources.json')
var pipelines = appResources.pipelines
var resourceToken = toLower(uniqueString(subscription().id, environmentName, location))
var tags = { 'azd-env-name': environmentName }
var functionAppName = '${abbrs.webSitesFunctions}${resourceToken}'
var deploymentContainerName = 'app-package-${take(functionAppName, 32)}-${take(resourceToken, 7)}'
var receiptSender = empty(receiptEmailFrom) ? communication.outputs.senderAddress : receiptEmailFrom

resource rg 'Microsoft.Resources/resourceGroups@2024-03-01' = {
  name: '${abbrs.resourcesResourceGroups}${environmentName}'
  location: location
  tags: tags
}

module identity 'app/identity.bicep' = {
  name: 'identity'
  scope: rg
  params: {
    name: '${abbrs.managedIdentityUserAssignedIdentities}${resourceToken}'
    location: location
    tags: tags
  }
}

module monitoring 'app/monitoring.bicep' = {
  name: 'monitoring'
  scope: rg
  params: {
    logAnalyticsName: '${abbrs.operationalInsightsWorkspaces}${resourceToken}'
    appInsightsName: '${abbrs.insightsComponents}${resourceToken}'
    location: location
    tags: tags
  }
}

module serviceBus 'app/servicebus.bicep' = {
  name: 'servicebus'
  scope: rg
  params: {
    name: '${abbrs.serviceBusNamespaces}${resourceToken}'
    location: location
    tags: tags
    sku: serviceBusSku
    messagingUnitsPerPartition: serviceBusMessagingUnitsPerPartition
    partitions: serviceBusPartitions
    queueNames: [for pipeline in pipelines: pipeline.queue]
  }
}

module storage 'app/storage.bicep' = {
  name: 'storage'
  scope: rg
  params: {
    name: '${abbrs.storageStorageAccounts}${resourceToken}'
    location: location
    tags: tags
    containers: [deploymentContainerName, 'receipts', 'deadletter-bodies']
    tables: appResources.tables
    queues: [replayQueueName, '${replayQueueName}-poison']
    skuName: storageSku
  }
}

module communication 'app/communication.bicep' = {
  name: 'communication'
  scope: rg
  params: {
    emailServiceName: '${abbrs.communicationEmailServices}${resourceToken}'
    communicationServiceName: '${abbrs.communicationCommunicationServices}${resourceToken}'
    tags: tags
    dataLocation: emailDataLocation
  }
}

module keyVault 'app/keyvault.bicep' = {
  name: 'keyvault'
  scope: rg
  params: {
    name: '${abbrs.keyVaultVaults}${resourceToken}'
    location: location
    tags: tags
    smtpUsername: smtpUsername
    smtpPassword: smtpPassword
  }
}

module functionApp 'app/function.bicep' = {
  name: 'function'
  scope: rg
  params: {
    name: functionAppName
    planName: '${abbrs.webServerFarms}${resourceToken}'
    location: location
    tags: union(tags, { 'azd-service-name': 'api' })
    identityId: identity.outputs.id
    identityClientId: identity.outputs.clientId
    storageAccountName: storage.outputs.name
    deploymentContainerName: deploymentContainerName
    serviceBusFullyQualifiedNamespace: serviceBus.outputs.fullyQualifiedNamespace
    appInsightsConnectionString: monitoring.outputs.appInsightsConnectionString
    keyVaultUri: keyVault.outputs.uri
    replayQueueName: replayQueueName
    emailSender: emailSender
    orderStepRows: orderStepRows
    communicationServicesEndpoint: communication.outputs.endpoint
    smtpHost: smtpHost
    smtpPort: smtpPort
    smtpStartTls: smtpStartTls
    receiptEmailFrom: receiptSender
    publicBaseUrl: publicBaseUrl
    keyRoles: keyRoles
    alertDeadLetterWaitSeconds: alertDeadLetterWaitMinutes * 60
    alertFailedSessionsThreshold: alertFailedSessionsThreshold
    alertFailedSessionsWindowMinutes: alertFailedSessionsWindowMinutes
  }
}

module consoleApp 'app/console-app.bicep' = if (createConsoleApp) {
  name: 'console-app'
  scope: rg
  params: {
    functionAppName: functionAppName
  }
}

module consoleAuth 'app/console-auth.bicep' = if (!empty(consoleAuthClientId) || createConsoleApp) {
  name: 'console-auth'
  scope: rg
  params: {
    functionAppName: functionApp.outputs.name
    clientId: createConsoleApp ? consoleApp.outputs.clientId : consoleAuthClientId
  }
}

module alerts 'app/alerts.bicep' = if (!empty(alertEmail)) {
  name: 'alerts'
  scope: rg
  params: {
    location: location
    tags: tags
    actionGroupName: '${abbrs.insightsActionGroups}${resourceToken}'
    alertEmail: alertEmail
    serviceBusNamespaceName: serviceBus.outputs.name
    appInsightsName: monitoring.outputs.appInsightsName
    queueNames: serviceBus.outputs.queueNames
    deadLetterWaitMinutes: alertDeadLetterWaitMinutes
    failedSessionsThreshold: alertFailedSessionsThreshold
    failedSessionsWindowMinutes: alertFailedSessionsWindowMinutes
  }
}

// One module per kind of role assignment: once for the app's identity, once for the developer
// (so `func start` against Azure resources runs as the developer, with no keys).
module appServiceBusRoles 'app/rbac/servicebus-role.bicep' = {
  name: 'servicebus-roles-app'
  scope: rg
  params: {
    namespaceName: serviceBus.outputs.name
    principalId: identity.outputs.principalId
    principalType: 'ServicePrincipal'
    scaledQueueNames: serviceBus.outputs.queueNames
  }
}

module developerServiceBusRoles 'app/rbac/servicebus-role.bicep' = if (!empty(principalId)) {
  name: 'servicebus-roles-developer'
  scope: rg
  params: {
    namespaceName: serviceBus.outputs.name
    principalId: principalId
    principalType: 'User'
  }
}

module appStorageRoles 'app/rbac/storage-role.bicep' = {
  name: 'storage-roles-app'
  scope: rg
  params: {
    storageAccountName: storage.outputs.name
    principalId: identity.outputs.principalId
    principalType: 'ServicePrincipal'
  }
}

module developerStorageRoles 'app/rbac/storage-role.bicep' = if (!empty(principalId)) {
  name: 'storage-roles-developer'
  scope: rg
  params: {
    storageAccountName: storage.outputs.name
    principalId: principalId
    principalType: 'User'
  }
}

module appKeyVaultRoles 'app/rbac/keyvault-role.bicep' = {
  name: 'keyvault-roles-app'
  scope: rg
  params: {
    keyVaultName: keyVault.outputs.name
    principalId: identity.outputs.principalId
    principalType: 'ServicePrincipal'
    canWriteSecrets: false
  }
}

// The developer sets the SMTP secrets; the app only reads them.
module developerKeyVaultRoles 'app/rbac/keyvault-role.bicep' = if (!empty(principalId)) {
  name: 'keyvault-roles-developer'
  scope: rg
  params: {
    keyVaultName: keyVault.outputs.name
    principalId: principalId
    principalType: 'User'
    canWriteSecrets: true
  }
}

module appCommunicationRoles 'app/rbac/communication-role.bicep' = {
  name: 'communication-roles-app'
  scope: rg
  params: {
    communicationServiceName: communication.outputs.name
    principalId: identity.outputs.principalId
    principalType: 'ServicePrincipal'
  }
}

module developerCommunicationRoles 'app/rbac/communication-role.bicep' = if (!empty(principalId)) {
  name: 'communication-roles-developer'
  scope: rg
  params: {
    communicationServiceName: communication.outputs.name
    principalId: principalId
    principalType: 'User'
  }
}

module monitoringRoles 'app/rbac/monitoring-role.bicep' = {
  name: 'monitoring-roles'
  scope: rg
  params: {
    appInsightsName: monitoring.outputs.appInsightsName
    principalId: identity.outputs.principalId
  }
}

module databricks 'app/databricks.bicep' = if (deployDatabricks) {
  name: 'databricks'
  scope: rg
  params: {
    name: '${abbrs.databricksWorkspaces}${resourceToken}'
    location: location
    tags: tags
  }
}

output AZURE_LOCATION string = location
output AZURE_TENANT_ID string = tenant().tenantId
output AZURE_RESOURCE_GROUP string = rg.name
output AZURE_FUNCTION_APP_NAME string = functionApp.outputs.name
output SERVICE_BUS_FULLY_QUALIFIED_NAMESPACE string = serviceBus.outputs.fullyQualifiedNamespace
output STORAGE_ACCOUNT_NAME string = storage.outputs.name
output KEY_VAULT_NAME string = keyVault.outputs.name
output REPLAY_QUEUE_NAME string = replayQueueName
output EMAIL_SENDER string = emailSender
output COMMUNICATION_SERVICES_ENDPOINT string = communication.outputs.endpoint
output RECEIPT_EMAIL_FROM string = receiptSender
output DATABRICKS_WORKSPACE_URL string = deployDatabricks ? databricks.outputs.url : ''
