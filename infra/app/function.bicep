// The Function App on Flex Consumption (Linux, Python 3.13). Every connection is identity-based
// through the user-assigned identity (Communication Services Email included); the only secrets
// (SMTP's, when emailSender is smtp) are Key Vault references.
// FUNCTIONS_WORKER_RUNTIME / FUNCTIONS_EXTENSION_VERSION are not app settings on Flex: the runtime
// comes from functionAppConfig.runtime.
param name string
param planName string
param location string
param tags object = {}
param identityId string
param identityClientId string
param storageAccountName string
param deploymentContainerName string
param serviceBusFullyQualifiedNamespace string
param appInsightsConnectionString string
param keyVaultUri string
param replayQueueName string
param dlqArchiveSchedule string = '0 */5 * * * *'
@allowed(['acs', 'smtp'])
param emailSender string = 'acs'
param orderStepRows bool = false
param communicationServicesEndpoint string
param smtpHost string
param smtpPort string
param smtpStartTls string
param receiptEmailFrom string
param maximumInstanceCount int = 40
@description('Where the API\'s absolute URLs start (a custom domain, Front Door); empty: the API answers with paths alone.')
param publicBaseUrl string = ''
@description('KEY_ROLES: <role>=<SHA-256 hex of a function key> pairs (docs/console.md, "Roles").')
param keyRoles string = ''
param purgeSchedule string = '0 */5 * * * *'
param alertDeadLetterWaitSeconds int = 900
param alertFailedSessionsThreshold int = 10
param alertFailedSessionsWindowMinutes int = 15
param instanceMemoryMB int = 2048

// Each pipeline's queue setting (docs/pipelines.md; written by `python -m localdev.derived`).
var pipelineQueueSettings = [for pipeline in loadJsonContent('../app-resources.json').pipelines: {
  name: pipeline.queueSetting
  value: pipeline.queue
}]

// The app settings but the pipelines' queue settings.
var appSettings = [
  // Host storage and the app's tables, blobs and replay queue (identity-based).
  { name: 'AzureWebJobsStorage__accountName', value: storageAccountName }
  { name: 'AzureWebJobsStorage__credential', value: 'managedidentity' }
  { name: 'AzureWebJobsStorage__clientId', value: identityClientId }
  // Service Bus triggers and the sender (identity-based).
  { name: 'ServiceBusConnection__fullyQualifiedNamespace', value: serviceBusFullyQualifiedNamespace }
  { name: 'ServiceBusConnection__credential', value: 'managedidentity' }
  { name: 'ServiceBusConnection__clientId', value: identityClientId }
  // Telemetry with Entra auth (local auth is off); the Python worker exports the app's (docs/telemetry.md).
  { name: 'APPLICATIONINSIGHTS_CONNECTION_STRING', value: appInsightsConnectionString }
  { name: 'APPLICATIONINSIGHTS_AUTHENTICATION_STRING', value: 'ClientId=${identityClientId};Authorization=AAD' }
  { name: 'PYTHON_APPLICATIONINSIGHTS_ENABLE_TELEMETRY', value: 'true' }
  // Keep every trace (unset, azure-monitor-opentelemetry 1.8 samples 5 traces/s: _default_sampling_ratio); docs/telemetry.md, Sampling.
  { name: 'OTEL_TRACES_SAMPLER', value: 'microsoft.fixed_percentage' }
  { name: 'OTEL_TRACES_SAMPLER_ARG', value: '1.0' }
  // Threads for the synchronous functions: each session queue x maxConcurrentSessions + 4 for HTTP, timer, replay queue (unset: min(32, CPUs + 4)); written by `python -m localdev.derived`, docs/deploy.md.
  { name: 'PYTHON_THREADPOOL_THREAD_COUNT', value: string(loadJsonContent('../app-resources.json').threadCount) }
  // What the app reads (shared/config.py and the trigger decorators).
  { name: 'REPLAY_QUEUE_NAME', value: replayQueueName }
  { name: 'DLQ_ARCHIVE_SCHEDULE', value: dlqArchiveSchedule }
  { name: 'DLQ_ARCHIVE_MAX_MESSAGES', value: '2000' }
  { name: 'DLQ_ARCHIVE_MAX_SECONDS', value: '240' }
  { name: 'DLQ_ARCHIVE_RECEIVE_WAIT_SECONDS', value: '2' }
  { name: 'REPLAY_MAX_DEQUEUE_COUNT', value: '5' }
  { name: 'ORDER_TAX_RATE', value: '0.25' }
  { name: 'ORDER_SHIPPING_FEE', value: '4.95' }
  // Receipts: Azure Communication Services Email with the app's identity (docs/processor.md,
  // "The receipt e-mail, once"), or SMTP.
  { name: 'EMAIL_SENDER', value: emailSender }
  { name: 'CommunicationServicesConnection__endpoint', value: communicationServicesEndpoint }
  { name: 'CommunicationServicesConnection__credential', value: 'managedidentity' }
  { name: 'CommunicationServicesConnection__clientId', value: identityClientId }
  { name: 'SMTP_HOST', value: smtpHost }
  { name: 'SMTP_PORT', value: smtpPort }
  { name: 'SMTP_STARTTLS', value: smtpStartTls }
  { name: 'SMTP_USERNAME', value: '@Microsoft.KeyVault(SecretUri=${keyVaultUri}secrets/smtp-username/)' }
  { name: 'SMTP_PASSWORD', value: '@Microsoft.KeyVault(SecretUri=${keyVaultUri}secrets/smtp-password/)' }
  { name: 'RECEIPT_EMAIL_FROM', value: receiptEmailFrom }
  { name: 'PAYMENT_SIMULATOR_DECLINE_TOKENS', value: '' }
  { name: 'PAYMENT_SIMULATOR_OUTAGE_TOKENS', value: '' }
  { name: 'ORDER_NUMBER_BLOCK_SIZE', value: '0' }
  // During a deploy over a release that reads orders by their step rows (docs/deploy.md).
  { name: 'ORDER_STEP_ROWS', value: orderStepRows ? 'true' : 'false' }
  // Empty: each pipeline's declared retry window and backoffs (docs/processor.md).
  { name: 'TASK_RETRY_WINDOW_SECONDS', value: '' }
  { name: 'TASK_RETRY_MIN_BACKOFF_SECONDS', value: '' }
  { name: 'TASK_RETRY_MAX_BACKOFF_SECONDS', value: '' }
  { name: 'TASK_HOLD_SECONDS', value: '300' }
  { name: 'PIPELINE_CIRCUIT_THRESHOLD', value: '5' }
  // Who may do what (docs/console.md, "Roles") and where the API's URLs start.
  { name: 'PUBLIC_BASE_URL', value: publicBaseUrl }
  { name: 'KEY_ROLES', value: keyRoles }
  { name: 'DEFAULT_KEY_ROLE', value: 'Editor' }
  // Retention (docs/capacity.md, "Retention"): days each kind of record is kept, 0 for good.
  { name: 'PURGE_SCHEDULE', value: purgeSchedule }
  { name: 'PURGE_MAX_SECONDS', value: '240' }
  { name: 'RETENTION_IDEMPOTENCY_KEYS_DAYS', value: '7' }
  { name: 'RETENTION_CONFIRMATIONS_DAYS', value: '1' }
  { name: 'RETENTION_REPLAYED_SESSIONS_DAYS', value: '30' }
  { name: 'RETENTION_RESOLVED_SESSIONS_DAYS', value: '30' }
  { name: 'RETENTION_JOBS_DAYS', value: '90' }
  { name: 'RETENTION_REPLAY_REQUESTS_DAYS', value: '30' }
  { name: 'RETENTION_AUDIT_DAYS', value: '365' }
  // The overview's alerts, with the thresholds of the Azure alerts (app/alerts.bicep).
  { name: 'ALERT_DEAD_LETTER_WAIT_SECONDS', value: string(alertDeadLetterWaitSeconds) }
  { name: 'ALERT_FAILED_SESSIONS_THRESHOLD', value: string(alertFailedSessionsThreshold) }
  { name: 'ALERT_FAILED_SESSIONS_WINDOW_MINUTES', value: string(alertFailedSessionsWindowMinutes) }
]

resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: storageAccountName
}

resource plan 'Microsoft.Web/serverfarms@2024-04-01' = {
  //checkov:skip=CKV_AZURE_225: Flex Consumption zone redundancy is available in a few regions only; turn it on per region when the SLA needs it.
  name: planName
  location: location
  tags: tags
  kind: 'functionapp'
  sku: {
    tier: 'FlexConsumption'
    name: 'FC1'
  }
  properties: {
    reserved: true
  }
}

resource functionApp 'Microsoft.Web/sites@2024-04-01' = {
  //checkov:skip=CKV_AZURE_222: POST /api/orders and the replay endpoint are called from outside Azure; function keys guard them (a private endpoint is the VNet variant's job).
  //checkov:skip=CKV_AZURE_17: callers authenticate with function keys; required client certificates would lock them out.
  //checkov:skip=CKV_AZURE_212: Flex Consumption scales from zero on Service Bus and HTTP load; a minimum instance count is the always-ready option, a cost choice.
  //checkov:skip=CKV_AZURE_213: Flex Consumption does not support the App Service health check; the platform monitors the Functions host.
  name: name
  location: location
  tags: tags
  kind: 'functionapp,linux'
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: { '${identityId}': {} }
  }
  properties: {
    serverFarmId: plan.id
    httpsOnly: true
    clientCertMode: 'Optional'
    keyVaultReferenceIdentity: identityId
    siteConfig: {
      minTlsVersion: '1.2'
      ftpsState: 'Disabled'
      http20Enabled: true
      httpLoggingEnabled: true
      detailedErrorLoggingEnabled: true
      requestTracingEnabled: true
      appSettings: concat(pipelineQueueSettings, appSettings)
    }
    functionAppConfig: {
      deployment: {
        storage: {
          type: 'blobContainer'
          value: '${storage.properties.primaryEndpoints.blob}${deploymentContainerName}'
          authentication: {
            type: 'UserAssignedIdentity'
            userAssignedIdentityResourceId: identityId
          }
        }
      }
      scaleAndConcurrency: {
        maximumInstanceCount: maximumInstanceCount
        instanceMemoryMB: instanceMemoryMB
      }
      runtime: {
        name: 'python'
        version: '3.13'
      }
    }
  }

}

output name string = functionApp.name
output defaultHostName string = functionApp.properties.defaultHostName
