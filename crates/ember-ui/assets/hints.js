// What the page says when a selection is empty: what was asked, and the likely reasons, each
// with what to do (time range, agent, tenant).

// The tenant as the server sees it.
const tenantName = (tenant) => (tenant ? `"${tenant}"` : "anonymous (no X-Scope-OrgID)");

// The status line of an empty answer: `what` is the selection's description, `types` how
// many profile types the tenant has at all (0: nothing was ever pushed under this tenant).
export function noDataHint({ what, tenant, types }) {
  if (types === 0) {
    return `Tenant ${tenantName(tenant)} has no profiles at all on this server. ` +
      `Check that an agent is running and pushing here (its exporters.server.url is ${location.origin}), ` +
      "or enter the tenant the data was pushed under in the Tenant field above.";
  }
  return `No profiles ${what} in this time range. Try a longer range (the presets above), ` +
    `check that an agent is running and pushing to this server, or the tenant (now ${tenantName(tenant)}).`;
}
