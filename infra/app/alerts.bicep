// The alerts that wake someone, wired to one action group that e-mails the operators: the same
// conditions the console's overview shows locally (shared/service_layer/alerts.py,
// docs/console.md "Alerts"), with the same thresholds (the app's ALERT_* settings).
//
// - dead letters waiting longer than the archive schedule allows: a session queue's dead-letter
//   count never fell to 0 in the window (Service Bus metric DeadletteredMessages, Minimum, per
//   queue): the archive timer, every 5 minutes, empties it when it works;
// - failed sessions per pipeline above a threshold in a window: the app's counter
//   pipeline.sessions.failed (docs/telemetry.md), summed per pipeline;
// - the archive timer failing: its invocations that failed, and its log line
//   "archive_dead_letters failed: ..." (shared/entrypoints/timer_runs.py);
// - a pipeline paused by its circuit: the gauge pipeline.paused (1 while paused) with
//   cause=circuit, per pipeline.
// Log alerts query the workspace-based Application Insights component's tables (customMetrics,
// traces, requests): https://learn.microsoft.com/azure/azure-monitor/alerts/alerts-create-log-alert-rule
param location string
param tags object = {}
param actionGroupName string
@description('Who is woken: the action group e-mails this address.')
param alertEmail string
param serviceBusNamespaceName string
param appInsightsName string
@description('The pipelines\' session queues (infra/app-resources.json).')
param queueNames array
@allowed([5, 15, 30, 60])
@description('How long a dead letter may wait for the archive: a few archive runs (it runs every 5 minutes).')
param deadLetterWaitMinutes int = 15
param failedSessionsThreshold int = 10
@minValue(5)
@maxValue(1440)
param failedSessionsWindowMinutes int = 15

resource namespace 'Microsoft.ServiceBus/namespaces@2022-10-01-preview' existing = {
  name: serviceBusNamespaceName
}

resource appInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: appInsightsName
}

resource actionGroup 'Microsoft.Insights/actionGroups@2023-01-01' = {
  name: actionGroupName
  location: 'global'
  tags: tags
  properties: {
    groupShortName: 'pipelines'
    enabled: true
    emailReceivers: [
      {
        name: 'operators'
        emailAddress: alertEmail
        useCommonAlertSchema: true
      }
    ]
  }
}

resource deadLettersWaiting 'Microsoft.Insights/metricAlerts@2018-03-01' = {
  name: 'dead-letters-waiting'
  location: 'global'
  tags: tags
  properties: {
    description: 'Dead letters have waited in a session queue\'s dead-letter queue for ${deadLetterWaitMinutes} minutes: the archive timer is not emptying it (docs/dead-letters.md).'
    severity: 2
    enabled: true
    scopes: [namespace.id]
    evaluationFrequency: (deadLetterWaitMinutes == 5) ? 'PT1M' : 'PT5M'
    windowSize: 'PT${deadLetterWaitMinutes}M'
    criteria: {
      'odata.type': 'Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria'
      allOf: [
        {
          criterionType: 'StaticThresholdCriterion'
          name: 'DeadLettersNeverArchived'
          metricNamespace: 'Microsoft.ServiceBus/namespaces'
          metricName: 'DeadletteredMessages'
          dimensions: [
            {
              name: 'EntityName'
              operator: 'Include'
              values: queueNames
            }
          ]
          timeAggregation: 'Minimum'
          operator: 'GreaterThan'
          threshold: 0
        }
      ]
    }
    autoMitigate: true
    actions: [
      {
        actionGroupId: actionGroup.id
      }
    ]
  }
}

resource failedSessions 'Microsoft.Insights/scheduledQueryRules@2023-03-15-preview' = {
  name: 'failed-sessions'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'Failed sessions per pipeline'
    description: 'More than ${failedSessionsThreshold} sessions of a pipeline failed in ${failedSessionsWindowMinutes} minutes: look at the failure groups on the console.'
    severity: 2
    enabled: true
    scopes: [appInsights.id]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT${failedSessionsWindowMinutes}M'
    criteria: {
      allOf: [
        {
          query: 'customMetrics | where name == "pipeline.sessions.failed" | extend pipeline = tostring(customDimensions["pipeline"]) | summarize failed = sum(valueSum) by pipeline'
          timeAggregation: 'Total'
          metricMeasureColumn: 'failed'
          dimensions: [
            {
              name: 'pipeline'
              operator: 'Include'
              values: ['*']
            }
          ]
          operator: 'GreaterThan'
          threshold: failedSessionsThreshold
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: true
    actions: {
      actionGroups: [actionGroup.id]
    }
  }
}

resource archiveTimerFailing 'Microsoft.Insights/scheduledQueryRules@2023-03-15-preview' = {
  name: 'archive-timer-failing'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'The archive timer is failing'
    description: 'The archive timer failed: dead letters stay in Service Bus until it works again. Its error is in the log line "archive_dead_letters failed: ...".'
    severity: 1
    enabled: true
    scopes: [appInsights.id]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    criteria: {
      allOf: [
        {
          query: 'union (requests | where operation_Name == "archive_dead_letters" and success == false), (traces | where message startswith "archive_dead_letters failed") | summarize failures = count()'
          timeAggregation: 'Total'
          metricMeasureColumn: 'failures'
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: true
    actions: {
      actionGroups: [actionGroup.id]
    }
  }
}

resource pipelinePaused 'Microsoft.Insights/scheduledQueryRules@2023-03-15-preview' = {
  name: 'pipeline-paused-by-circuit'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'A pipeline is paused by its circuit'
    description: 'A pipeline stopped taking sessions because a dependency kept failing (the log line "pipeline=<name> paused cause=circuit dependency=..."): it resumes when the dependency answers, or resume it from the console.'
    severity: 1
    enabled: true
    scopes: [appInsights.id]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT5M'
    criteria: {
      allOf: [
        {
          query: 'customMetrics | where name == "pipeline.paused" and tostring(customDimensions["cause"]) == "circuit" | extend pipeline = tostring(customDimensions["pipeline"]) | summarize paused = max(value) by pipeline'
          timeAggregation: 'Maximum'
          metricMeasureColumn: 'paused'
          dimensions: [
            {
              name: 'pipeline'
              operator: 'Include'
              values: ['*']
            }
          ]
          operator: 'GreaterThanOrEqual'
          threshold: 1
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: true
    actions: {
      actionGroups: [actionGroup.id]
    }
  }
}

output actionGroupId string = actionGroup.id
