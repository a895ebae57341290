// Key Vault: the app reads secrets (Secrets User); the developer also writes them (Secrets Officer).
param keyVaultName string
param principalId string
@allowed(['ServicePrincipal', 'User'])
param principalType string
param canWriteSecrets bool = false

var secretsUser = '4633458b-17de-408a-b874-0445c86b69e6' // Key Vault Secrets User
var secretsOfficer = 'b86a8fe4-44ce-4948-aee5-eccb2c155cd7' // Key Vault Secrets Officer
var role = canWriteSecrets ? secretsOfficer : secretsUser

resource vault 'Microsoft.KeyVault/vaults@2023-07-01' existing = {
  name: keyVaultName
}

resource assignment 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(vault.id, principalId, role)
  scope: vault
  properties: {
    principalId: principalId
    principalType: principalType
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', role)
  }
}
