// App Service Authentication (Easy Auth) with Microsoft Entra ID in front of the operator
// console (/console): people sign in with their organisation's account, and the console
// records them (X-MS-CLIENT-PRINCIPAL-NAME) in its audit trail. The HTTP API keeps its function
// keys: its routes, and the Functions host's own /admin and /runtime paths, are excluded (the
// list is console-auth-excluded-paths.json; tests/infra checks it against the app's routes).
// Every other path, the console's included, needs a signed-in user.
param functionAppName string

@description('Application (client) id of the Entra app registration that signs people in to the console (ID tokens enabled, redirect URI https://<app>.azurewebsites.net/.auth/login/aad/callback).')
param clientId string

@description('Tenant whose users may sign in.')
param tenantId string = tenant().tenantId

resource functionApp 'Microsoft.Web/sites@2024-04-01' existing = {
  name: functionAppName
}

resource authSettings 'Microsoft.Web/sites/config@2024-04-01' = {
  //checkov:skip=CKV_AZURE_13: checkov reads this authsettingsV2 config resource as a whole site; the site's own checks run on function.bicep.
  //checkov:skip=CKV_AZURE_63: checkov reads this authsettingsV2 config resource as a whole site; the site's own checks run on function.bicep.
  //checkov:skip=CKV_AZURE_65: checkov reads this authsettingsV2 config resource as a whole site; the site's own checks run on function.bicep.
  //checkov:skip=CKV_AZURE_66: checkov reads this authsettingsV2 config resource as a whole site; the site's own checks run on function.bicep.
  //checkov:skip=CKV_AZURE_80: checkov reads this authsettingsV2 config resource as a whole site; the site's own checks run on function.bicep.
  //checkov:skip=CKV_AZURE_88: checkov reads this authsettingsV2 config resource as a whole site; the site's own checks run on function.bicep.
  //checkov:skip=CKV_AZURE_222: checkov reads this authsettingsV2 config resource as a whole site; the site's own checks run on function.bicep.
  parent: functionApp
  name: 'authsettingsV2'
  properties: {
    platform: {
      enabled: true
      runtimeVersion: '~1'
    }
    globalValidation: {
      requireAuthentication: true
      unauthenticatedClientAction: 'RedirectToLoginPage'
      redirectToProvider: 'azureactivedirectory'
      excludedPaths: loadJsonContent('console-auth-excluded-paths.json')
    }
    identityProviders: {
      azureActiveDirectory: {
        enabled: true
        registration: {
          openIdIssuer: '${environment().authentication.loginEndpoint}${tenantId}/v2.0'
          clientId: clientId
        }
        validation: {
          allowedAudiences: [
            clientId
            'api://${clientId}'
          ]
        }
      }
    }
    login: {
      tokenStore: {
        enabled: false
      }
    }
    httpSettings: {
      requireHttps: true
    }
  }
}
