// The operator console's Entra app registration, made with the Microsoft Graph Bicep extension
// (https://learn.microsoft.com/graph/templates/bicep/reference/applications; needs
// Application.ReadWrite.All): ID tokens for App Service Authentication's sign-in, the app roles
// the console checks (console-roles.json: Console.Reader, Console.Operator, Console.Editor,
// docs/console.md "Roles"), and a service principal that requires an assignment, so that only
// the people (or groups) given one of the roles can sign in at all.
extension microsoftGraphV1

param functionAppName string

@description('The registration\'s unique name in the tenant.')
param uniqueName string = 'console-${functionAppName}'

resource consoleApp 'Microsoft.Graph/applications@v1.0' = {
  uniqueName: uniqueName
  displayName: 'Pipelines console (${functionAppName})'
  signInAudience: 'AzureADMyOrg'
  appRoles: loadJsonContent('console-roles.json')
  web: {
    redirectUris: ['https://${functionAppName}.azurewebsites.net/.auth/login/aad/callback']
    implicitGrantSettings: {
      enableIdTokenIssuance: true
    }
  }
}

resource consoleServicePrincipal 'Microsoft.Graph/servicePrincipals@v1.0' = {
  appId: consoleApp.appId
  appRoleAssignmentRequired: true
}

output clientId string = consoleApp.appId
