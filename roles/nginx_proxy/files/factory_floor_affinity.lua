-- Factory Floor: conversation-affine routing with a load bound, for nginx's Lua module
-- (Debian's libnginx-mod-http-lua with lua-resty-core; JSON by lua-cjson).
-- Installed by the nginx_proxy role when nginx_proxy_balance is "affinity"; see the
-- role README, "Conversation affinity".
--
--   init(settings_json)  init_by_lua: settings, and the members the membership checker
--                        exported (members_file), read at every nginx start and reload
--                        (nginx -t runs no Lua: files/nginx-check runs init() for it)
--   access()             access_by_lua in location /v1/: the request's routing key
--   balance()            balancer_by_lua: the engine for this try
--   log()                log_by_lua: the request no longer holds its engine
--   status()             content_by_lua: in-flight counts and members as JSON (no keys)
--
-- The key itself is never stored, logged or sent anywhere: only its MD5 lives in
-- ngx.ctx for the balancer, and $ff_route names where the key came from ("header" for
-- any of the headers, never which value).

local cjson = require("cjson.safe")
local balancer = require("ngx.balancer")

local ngx = ngx
local byte = string.byte
local concat = table.concat
local ceil = math.ceil
local ipairs = ipairs
local pairs = pairs
local type = type
local tostring = tostring

local _M = { _VERSION = "1" }

-- Prefix of the shared dict's keys that count requests in flight per member name.
local INFLIGHT = "inflight:"
-- Shared counter that rotates ties among equally loaded members.
local ROTATE = "rotate"
-- The member list of the last (re)load and its generation, in the shared dict: workers
-- of the configuration before a reload still answer requests on their kept-alive client
-- connections, and must not send them to an engine the reload drained.
local MEMBERS = "members"
local GENERATION = "generation"

local settings = {
    headers = { "x-session-id" },
    body_fields = { "prompt_cache_key", "user" },
    prefix = true,
    balance_factor = 1.5,
    members_file = "/etc/nginx/factory-floor-members.json",
    dict = "factory_floor_inflight",
}
-- nginx's $http_* variable of each of settings.headers, in their order.
local header_vars = { "http_x_session_id" }
-- {name=, host=, port=, max_num_seqs=}, sorted by name. Empty: nginx's own choice.
local members = {}
local mode = "none"
local generation = nil

local function fail(message)
    error("factory_floor_affinity: " .. message, 0)
end

-- A member list that cannot be used (empty, cut short, not the checker's) must never keep
-- nginx from starting: it counts as no list at all, nginx balances over its own server
-- lines (the same pass wrote them) and the checker writes the list again at its next pass.
local function unusable(path, why)
    ngx.log(ngx.ERR, "factory_floor_affinity: ", path, " ignored (", why,
            "): balancing over nginx's server lines until the membership checker writes it again")
    return {}, "unusable"
end

local function read_members(path)
    local handle = io.open(path, "rb")
    if not handle then
        -- Not written yet (the checker writes it at its first pass): nginx balances
        -- over its own server lines until then.
        return {}, "none"
    end
    local text = handle:read("*a")
    handle:close()
    local doc, err = cjson.decode(text or "")
    if type(doc) ~= "table" or type(doc.members) ~= "table" then
        return unusable(path, "not the checker's member list: " .. tostring(err or "no members array"))
    end
    local out = {}
    for _, m in ipairs(doc.members) do
        if type(m) ~= "table" or type(m.name) ~= "string" or type(m.host) ~= "string"
                or type(m.port) ~= "number" then
            return unusable(path, "a member without name, host or port")
        end
        local host = m.host
        if host:find(":", 1, true) and byte(host, 1) ~= 91 then
            host = "[" .. host .. "]"   -- IPv6 literal, as nginx parses it
        end
        out[#out + 1] = {
            name = m.name,
            host = host,
            port = m.port,
            max_num_seqs = type(m.max_num_seqs) == "number" and m.max_num_seqs or 0,
        }
    end
    table.sort(out, function(a, b) return a.name < b.name end)
    return out, type(doc.mode) == "string" and doc.mode or "unknown"
end

-- A JSON array (a table keyed 1..n, possibly empty) of non-empty strings, each matching
-- `pattern` when given.
local function is_list_of_names(value, pattern)
    if type(value) ~= "table" then
        return false
    end
    local n = 0
    for _ in pairs(value) do
        n = n + 1
    end
    for i = 1, n do
        if type(value[i]) ~= "string" or value[i] == "" or (pattern and not value[i]:find(pattern)) then
            return false
        end
    end
    return true
end

function _M.init(settings_json)
    local given, err = cjson.decode(settings_json)
    if type(given) ~= "table" then
        fail("settings are not JSON: " .. tostring(err))
    end
    for k, v in pairs(given) do
        settings[k] = v
    end
    -- Letters, digits and '-': nginx drops a request header with '_' (underscores_in_headers
    -- off), so such a name could never match.
    if not is_list_of_names(settings.headers, "^[%w-]+$") then
        fail("headers (nginx_proxy_affinity_headers) must be a list of header names (letters, digits, '-'), got "
             .. cjson.encode(settings.headers))
    end
    if type(settings.balance_factor) ~= "number" or settings.balance_factor < 1 then
        fail("balance_factor must be a number >= 1")
    end
    -- Checked here, at load (nginx -t), not at the first request: a string where a list
    -- belongs (nginx_proxy_affinity_body_fields: user) made every POST answer 500.
    if not is_list_of_names(settings.body_fields) then
        fail("body_fields (nginx_proxy_affinity_body_fields) must be a list of field names, got "
             .. cjson.encode(settings.body_fields))
    end
    if type(settings.prefix) ~= "boolean" then
        fail("prefix (nginx_proxy_affinity_prefix) must be true or false")
    end
    if type(settings.members_file) ~= "string" or settings.members_file == "" then
        fail("members_file must be a path")
    end
    if type(settings.dict) ~= "string" or ngx.shared[settings.dict] == nil then
        fail("dict must name a lua_shared_dict of nginx.conf")
    end
    header_vars = {}
    for i, name in ipairs(settings.headers) do
        header_vars[i] = "http_" .. name:lower():gsub("-", "_")
    end
    members, mode = read_members(settings.members_file)
    local dict = ngx.shared[settings.dict]
    if dict then
        dict:set(MEMBERS, cjson.encode({ mode = mode, members = members }))
        generation = dict:incr(GENERATION, 1, 0)
    end
end

-- The members of the newest (re)load, which may be newer than this worker's configuration.
local function refresh(dict)
    local current = dict:get(GENERATION)
    if current == nil or current == generation then
        return
    end
    local doc = cjson.decode(dict:get(MEMBERS) or "")
    if type(doc) == "table" and type(doc.members) == "table" then
        members = doc.members
        mode = type(doc.mode) == "string" and doc.mode or "unknown"
    end
    generation = current
end

-- ---------------------------------------------------------------- the key

local function text_of(content)
    if type(content) == "string" then
        return content
    end
    if type(content) == "table" then
        local parts = {}
        for _, part in ipairs(content) do
            if type(part) == "table" and type(part.text) == "string" then
                parts[#parts + 1] = part.text
            end
        end
        return concat(parts, "\n")
    end
    return ""
end

-- The conversation's leading messages: every message up to and including the first
-- user message (system or developer prompt, first question), role and text only.
-- Later turns append to the history, so every turn of one conversation gives the
-- same text. nil when there is no user message.
local function conversation_prefix(messages)
    if type(messages) ~= "table" then
        return nil
    end
    local out = {}
    for _, m in ipairs(messages) do
        if type(m) ~= "table" then
            return nil
        end
        local role = type(m.role) == "string" and m.role or ""
        out[#out + 1] = role
        out[#out + 1] = "\0"
        out[#out + 1] = text_of(m.content)
        out[#out + 1] = "\0"
        if role == "user" then
            return concat(out)
        end
    end
    return nil
end

-- Sets ngx.ctx.ff_key (MD5 of the key, 16 bytes) and $ff_route:
-- header | <body field> | prefix (a key), large_body (body not in memory: no body key),
-- least_conn (no key). The first of settings.headers the request carries, non-empty, wins.
function _M.access()
    local key, route
    local var = ngx.var
    for _, name in ipairs(header_vars) do
        local value = var[name]
        if value and value ~= "" then
            key, route = value, "header"
            break
        end
    end
    -- A header key: the body is not read.
    if not key and ngx.req.get_method() == "POST" then
        ngx.req.read_body()
        local body = ngx.req.get_body_data()
        if body == nil then
            if ngx.req.get_body_file() then
                -- Larger than client_body_buffer_size: nginx keeps it in a temporary
                -- file, which is not read here.
                route = "large_body"
            end
        else
            local doc = cjson.decode(body)
            if type(doc) == "table" then
                for _, field in ipairs(settings.body_fields) do
                    local v = doc[field]
                    if (type(v) == "string" and v ~= "") or type(v) == "number" then
                        key, route = tostring(v), field
                        break
                    end
                end
                if not key and settings.prefix then
                    key = conversation_prefix(doc.messages)
                    if key then
                        route = "prefix"
                    end
                end
            end
        end
    end
    if key then
        ngx.ctx.ff_key = ngx.md5_bin(key)
    end
    ngx.var.ff_route = route or "least_conn"
end

-- ------------------------------------------------------------ the balancer

local function uint32(s, i)
    local a, b, c, d = byte(s, i, i + 3)
    return ((a * 256 + b) * 256 + c) * 256 + d
end

-- Rendezvous (highest random weight) hashing: each member scores MD5(key digest ..
-- name); the highest wins. Only the members' names matter, so every worker and every
-- reload agree, and a member leaving moves only the keys it won.
local function rendezvous(digest)
    local best, best_score
    for i, m in ipairs(members) do
        local h = ngx.md5_bin(digest .. m.name)
        local score = uint32(h, 1) * 4294967296 + uint32(h, 5)
        if best == nil or score > best_score then
            best, best_score = i, score
        end
    end
    return best
end

-- The least loaded member not in `skip`; ties rotate so equal members share the load.
local function least_loaded(loads, skip, dict)
    local n = #members
    local start = (dict:incr(ROTATE, 1, 0) or 0) % n
    local best
    for j = 0, n - 1 do
        local i = (start + j) % n + 1
        if not (skip and skip[members[i].name]) and (best == nil or loads[i] < loads[best]) then
            best = i
        end
    end
    return best
end

-- The key's member keeps the request unless it is at its bound: in flight >= its
-- max_num_seqs (the next request would queue in vLLM), or, while the site is busy,
-- in flight >= ceil(balance_factor * (all in flight + 1) / members), HAProxy's
-- hash-balance-factor. Busy: more in flight, this request included, than half the
-- members' max_num_seqs together. Below that every engine still batches another
-- sequence at almost no cost to the others, while a move costs the history's whole
-- prefill elsewhere. With an unknown max_num_seqs (0) the factor always applies.
local function within_bound(i, loads, total)
    local load = loads[i]
    local cap = members[i].max_num_seqs
    if cap > 0 and load >= cap then
        return false
    end
    local slots = 0
    for _, m in ipairs(members) do
        if m.max_num_seqs <= 0 then
            slots = nil
            break
        end
        slots = slots + m.max_num_seqs
    end
    if slots and 2 * (total + 1) <= slots then
        return true
    end
    return load < ceil(settings.balance_factor * (total + 1) / #members)
end

function _M.balance()
    local dict = ngx.shared[settings.dict]
    refresh(dict)
    local n = #members
    if n == 0 then
        return   -- nothing exported: nginx's own round robin over its server lines
    end
    local ctx = ngx.ctx
    local loads, total = {}, 0
    for i, m in ipairs(members) do
        local load = dict:get(INFLIGHT .. m.name) or 0
        if load < 0 then
            load = 0
        end
        loads[i] = load
        total = total + load
    end
    local chosen
    if ctx.ff_peer then
        -- A retry: the last try could not be sent (proxy_next_upstream). Release that
        -- engine and take the least loaded one not tried yet.
        dict:incr(INFLIGHT .. ctx.ff_peer, -1, 0)
        ctx.ff_tried = ctx.ff_tried or {}
        ctx.ff_tried[ctx.ff_peer] = true
        chosen = least_loaded(loads, ctx.ff_tried, dict) or least_loaded(loads, nil, dict)
    else
        if ctx.ff_key then
            chosen = rendezvous(ctx.ff_key)
            -- A conversation's first turn goes home under the same bound as its later
            -- turns: sent elsewhere, its second turn would read the whole thread again
            -- at home.
            if not within_bound(chosen, loads, total) then
                local least = least_loaded(loads, nil, dict)
                if loads[least] < loads[chosen] then
                    chosen = least
                    ngx.var.ff_route = ngx.var.ff_route .. "+spill"
                end
            end
        else
            chosen = least_loaded(loads, nil, dict)
        end
        if n > 1 then
            balancer.set_more_tries(n - 1)
        end
    end
    local m = members[chosen]
    local ok, err = balancer.set_current_peer(m.host, m.port)
    if not ok then
        ngx.log(ngx.ERR, "factory_floor_affinity: cannot send to ", m.name, ": ", err)
        return ngx.exit(ngx.ERROR)
    end
    dict:incr(INFLIGHT .. m.name, 1, 0)
    ctx.ff_peer = m.name
    -- Kept in a variable, not only in ngx.ctx: error_page's internal redirect
    -- (502 -> 503 + Retry-After) clears ngx.ctx before the log phase.
    ngx.var.ff_peer = m.name
end

function _M.log()
    local name = ngx.var.ff_peer
    if name and name ~= "" then
        ngx.shared[settings.dict]:incr(INFLIGHT .. name, -1, 0)
        ngx.var.ff_peer = ""
    end
end

function _M.status()
    local dict = ngx.shared[settings.dict]
    refresh(dict)
    local out = { mode = mode, members = {}, inflight = {} }
    for _, m in ipairs(members) do
        out.members[#out.members + 1] = { name = m.name, address = m.host .. ":" .. m.port,
                                          max_num_seqs = m.max_num_seqs }
    end
    for _, name in ipairs(dict:get_keys(0)) do
        if name:sub(1, #INFLIGHT) == INFLIGHT then
            out.inflight[name:sub(#INFLIGHT + 1)] = dict:get(name)
        end
    end
    out.balance_factor = settings.balance_factor
    ngx.header["Content-Type"] = "application/json"
    ngx.say(cjson.encode(out))
end

return _M
