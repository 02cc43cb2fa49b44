-- pick(heads) for examples/serve/lua-policy.toml: bids first, unless a regular request has waited more
-- than 250 ms (no starvation). heads lists the non-empty classes:
--   { class = name, queued = N, size = size hint, waited_us = N, weight = N, priority = N,
--     deadline_in_us = N (only when the head has a deadline) }
-- Return the name of the class to serve (nil or an unknown name: the oldest head is served).

function pick(heads)
  local bid, oldest = nil, nil
  for _, h in ipairs(heads) do
    if h.class == "bid" then bid = h end
    if oldest == nil or h.waited_us > oldest.waited_us then oldest = h end
  end
  if oldest.class ~= "bid" and oldest.waited_us > 250000 then
    return oldest.class
  end
  if bid then return "bid" end
  return oldest.class
end
