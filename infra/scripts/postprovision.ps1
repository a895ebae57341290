# azd postprovision hook (Windows): writes local.settings.json for the deployed resources,
# identity-based (no keys), like postprovision.sh.
$ErrorActionPreference = 'Stop'
$envValues = @{}
azd env get-values | ForEach-Object {
    if ($_ -match '^([^=]+)="?(.*?)"?$') { $envValues[$Matches[1]] = $Matches[2] }
}
$settings = [ordered]@{
    IsEncrypted = $false
    Values      = [ordered]@{
        FUNCTIONS_WORKER_RUNTIME                      = 'python'
        AzureWebJobsStorage__accountName              = $envValues['STORAGE_ACCOUNT_NAME']
        ServiceBusConnection__fullyQualifiedNamespace = $envValues['SERVICE_BUS_FULLY_QUALIFIED_NAMESPACE']
        PURCHASE_QUEUE_NAME                           = 'purchase-tasks'
        IMPORT_QUEUE_NAME                             = 'product-import-tasks'
        REPLAY_QUEUE_NAME                             = $envValues['REPLAY_QUEUE_NAME']
        DLQ_ARCHIVE_SCHEDULE                          = '0 */5 * * * *'
        DLQ_ARCHIVE_MAX_MESSAGES                      = '2000'
        DLQ_ARCHIVE_MAX_SECONDS                       = '240'
        DLQ_ARCHIVE_RECEIVE_WAIT_SECONDS              = '2'
        REPLAY_MAX_DEQUEUE_COUNT                      = '5'
        ORDER_TAX_RATE                                = '0.25'
        ORDER_SHIPPING_FEE                            = '4.95'
        EMAIL_SENDER                                  = $envValues['EMAIL_SENDER']
        CommunicationServicesConnection__endpoint     = $envValues['COMMUNICATION_SERVICES_ENDPOINT']
        SMTP_HOST                                     = 'localhost'
        SMTP_PORT                                     = '1025'
        SMTP_USERNAME                                 = ''
        SMTP_PASSWORD                                 = ''
        SMTP_STARTTLS                                 = 'false'
        RECEIPT_EMAIL_FROM                            = $envValues['RECEIPT_EMAIL_FROM']
        PAYMENT_SIMULATOR_DECLINE_TOKENS              = 'tok_declined'
        PAYMENT_SIMULATOR_OUTAGE_TOKENS               = ''
        ORDER_NUMBER_BLOCK_SIZE                       = '0'
        ORDER_STEP_ROWS                               = 'false'
        TASK_RETRY_WINDOW_SECONDS                     = ''
        TASK_RETRY_MIN_BACKOFF_SECONDS                = ''
        TASK_RETRY_MAX_BACKOFF_SECONDS                = ''
        TASK_HOLD_SECONDS                             = '300'
        PIPELINE_CIRCUIT_THRESHOLD                    = '5'
        PUBLIC_BASE_URL                               = ''
        KEY_ROLES                                     = ''
        DEFAULT_KEY_ROLE                              = 'Editor'
        PURGE_SCHEDULE                                = '0 */5 * * * *'
        PURGE_MAX_SECONDS                             = '240'
        RETENTION_IDEMPOTENCY_KEYS_DAYS               = '7'
        RETENTION_CONFIRMATIONS_DAYS                  = '1'
        RETENTION_REPLAYED_SESSIONS_DAYS              = '30'
        RETENTION_RESOLVED_SESSIONS_DAYS              = '30'
        RETENTION_JOBS_DAYS                           = '90'
        RETENTION_REPLAY_REQUESTS_DAYS                = '30'
        RETENTION_AUDIT_DAYS                          = '365'
        ALERT_DEAD_LETTER_WAIT_SECONDS                = '900'
        ALERT_FAILED_SESSIONS_THRESHOLD               = '10'
        ALERT_FAILED_SESSIONS_WINDOW_MINUTES          = '15'
    }
}
$settings | ConvertTo-Json -Depth 3 | Set-Content -Path local.settings.json -Encoding utf8
Write-Host "Wrote local.settings.json for $($envValues['AZURE_FUNCTION_APP_NAME']) (identity-based; sign in with 'az login')."
