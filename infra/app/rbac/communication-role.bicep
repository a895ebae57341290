// Communication Services: the built-in role that lets an identity send e-mail through the
// resource with Microsoft Entra ID (Azure Communication Services takes no custom roles;
// learn.microsoft.com/azure/communication-services/concepts/authentication and the built-in
// roles list, "Communication and Email Service Owner").
param communicationServiceName string
param principalId string
@allowed(['ServicePrincipal', 'User'])
param principalType string

var sender = '09976791-48a7-449e-bb21-39d1a415f350' // Communication and Email Service Owner

resource communicationService 'Microsoft.Communication/communicationServices@2023-04-01' existing = {
  name: communicationServiceName
}

resource assignment 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(communicationService.id, principalId, sender)
  scope: communicationService
  properties: {
    principalId: principalId
    principalType: principalType
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', sender)
  }
}
