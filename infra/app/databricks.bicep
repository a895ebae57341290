// Optional Azure Databricks workspace for the Spark import job (deployDatabricks=true).
param name string
param location string
param tags object = {}
@allowed(['standard', 'premium'])
param sku string = 'premium'

var managedResourceGroupName = 'databricks-rg-${name}-${uniqueString(name, resourceGroup().id)}'

resource workspace 'Microsoft.Databricks/workspaces@2024-05-01' = {
  //checkov:skip=CKV2_AZURE_48: optional workspace for a batch import job; a customer-managed key for DBFS needs a key the team owns and rotates, out of scope for the default.
  //checkov:skip=CKV_AZURE_158: private link needs VNet injection (a network design per deployment); the job reads no data the app does not already expose.
  name: name
  location: location
  tags: tags
  sku: { name: sku }
  properties: {
    managedResourceGroupId: subscriptionResourceId('Microsoft.Resources/resourceGroups', managedResourceGroupName)
    publicNetworkAccess: 'Enabled'
  }
}

output url string = 'https://${workspace.properties.workspaceUrl}'
