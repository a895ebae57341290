// Key Vault for the SMTP credentials, referenced from app settings. RBAC only (no access
// policies); the developer writes the secrets, the app's identity reads them.
param name string
param location string
param tags object = {}
@secure()
param smtpUsername string = ''
@secure()
param smtpPassword string = ''
@description('Secrets expire after a year; re-deploy or rotate before then.')
param secretExpiry int = dateTimeToEpoch(dateTimeAdd(utcNow(), 'P1Y'))

resource vault 'Microsoft.KeyVault/vaults@2023-07-01' = {
  //checkov:skip=CKV_AZURE_109: Flex Consumption without VNet integration has no fixed outbound addresses, so a firewall would block the Key Vault references; access is RBAC-only.
  //checkov:skip=CKV_AZURE_189: same reason: public endpoint with RBAC and no access policies; a private endpoint is the VNet variant's job.
  name: name
  location: location
  tags: tags
  properties: {
    tenantId: subscription().tenantId
    sku: { family: 'A', name: 'standard' }
    enableRbacAuthorization: true
    enableSoftDelete: true
    softDeleteRetentionInDays: 7
    enablePurgeProtection: true
    publicNetworkAccess: 'Enabled'
    networkAcls: {
      bypass: 'AzureServices'
      defaultAction: 'Allow'
    }
  }
}

// Written on every provision from the smtpUsername / smtpPassword parameters (azd passes the
// SMTP_USERNAME / SMTP_PASSWORD environment values; empty when unset, so the references still
// resolve). Set them with `azd env set` (docs/deploy.md), not in the vault by hand: a value
// set only in the vault is overwritten by the next provision.
resource smtpUsernameSecret 'Microsoft.KeyVault/vaults/secrets@2023-07-01' = {
  parent: vault
  name: 'smtp-username'
  properties: {
    value: smtpUsername
    contentType: 'text/plain'
    attributes: { exp: secretExpiry }
  }
}

resource smtpPasswordSecret 'Microsoft.KeyVault/vaults/secrets@2023-07-01' = {
  parent: vault
  name: 'smtp-password'
  properties: {
    value: smtpPassword
    contentType: 'text/plain'
    attributes: { exp: secretExpiry }
  }
}

output name string = vault.name
output uri string = vault.properties.vaultUri
