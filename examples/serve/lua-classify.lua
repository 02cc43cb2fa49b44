-- classify(request) for examples/serve/lua-classify.toml.
-- request = { method, path, query, headers = {lower-case name = value}, cookies = {name = value}, peer }
-- Return a class name (and optionally hints { size = N, deadline_ms = N }), or nil to let the rules decide.

local paid_users = { alice = true, bob = true }

function classify(req)
  local user = req.headers["x-user"] or req.cookies["user"]
  if user and paid_users[user] then
    -- paid users' big exports are still paid, but tell srpt/wfq how large they are
    if string.find(req.path, "^/export") then
      return "paid", { size = 100000 }
    end
    return "paid"
  end
  return nil
end
