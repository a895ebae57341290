// Receipts through Azure Communication Services Email: an Email Communication Service with an
// Azure-managed domain (DoNotReply@<guid>.azurecomm.net, no DNS to set up), and a Communication
// Services resource linked to that domain, which the app sends through with its identity
// (rbac/communication-role.bicep). learn.microsoft.com/azure/communication-services/quickstarts/
// email/create-email-communication-resource, add-azure-managed-domains and
// connect-email-communication-resource; the resource types' reference:
// learn.microsoft.com/azure/templates/microsoft.communication.
param emailServiceName string
param communicationServiceName string
param tags object = {}
@description('Where the resources keep their data at rest: the Email service and the Communication Services resource must share it for the domain to link.')
param dataLocation string = 'United States'

resource emailService 'Microsoft.Communication/emailServices@2023-04-01' = {
  name: emailServiceName
  location: 'global'
  tags: tags
  properties: {
    dataLocation: dataLocation
  }
}

resource domain 'Microsoft.Communication/emailServices/domains@2023-04-01' = {
  parent: emailService
  name: 'AzureManagedDomain'
  location: 'global'
  tags: tags
  properties: {
    domainManagement: 'AzureManaged'
    // Receipts are transactional: no tracking pixels or rewritten links in them.
    userEngagementTracking: 'Disabled'
  }
}

resource communicationService 'Microsoft.Communication/communicationServices@2023-04-01' = {
  name: communicationServiceName
  location: 'global'
  tags: tags
  properties: {
    dataLocation: dataLocation
    linkedDomains: [domain.id]
  }
}

output name string = communicationService.name
output endpoint string = 'https://${communicationService.properties.hostName}'
// The Azure-managed domain's sender address: DoNotReply is its default sender username.
output senderAddress string = 'DoNotReply@${domain.properties.mailFromSenderDomain}'
