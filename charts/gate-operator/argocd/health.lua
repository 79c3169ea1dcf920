-- Argo CD health check for gate.intutic.io/v1alpha1 HarnessAgentPolicy and SessionConfirmer.
-- Progressing until the controller has observed the current generation and set Ready;
-- then Healthy on Ready=True and Degraded on Ready=False.
local hs = {}

local generation = 0
if obj.metadata ~= nil and obj.metadata.generation ~= nil then
  generation = obj.metadata.generation
end
local waiting = "waiting for the controller to observe generation " .. string.format("%d", generation)

if obj.status == nil or obj.status.observedGeneration == nil or obj.status.observedGeneration < generation then
  hs.status = "Progressing"
  hs.message = waiting
  return hs
end

local ready = nil
if obj.status.conditions ~= nil then
  for _, condition in ipairs(obj.status.conditions) do
    if condition.type == "Ready" then
      ready = condition
      break
    end
  end
end

if ready == nil then
  hs.status = "Progressing"
  hs.message = "waiting for the Ready condition"
  return hs
end

if ready.observedGeneration ~= nil and ready.observedGeneration < generation then
  hs.status = "Progressing"
  hs.message = waiting
  return hs
end

local message = ready.message or ""
local detail = message
if ready.reason ~= nil and ready.reason ~= "" then
  if message ~= "" then
    detail = ready.reason .. ": " .. message
  else
    detail = ready.reason
  end
end

if ready.status == "True" then
  hs.status = "Healthy"
  hs.message = message
elseif ready.status == "False" then
  hs.status = "Degraded"
  hs.message = detail
else
  hs.status = "Progressing"
  if detail ~= "" then
    hs.message = detail
  else
    hs.message = "waiting for the Ready condition"
  end
end
return hs
