package com.example.cetp.tasks;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;
import org.json.JSONArray;
import org.json.JSONException;
import org.json.JSONObject;

/**
 * The tool catalogue (§3.3, §3.4) and each tool's business rules. The
 * descriptors are data; the checks of each tool's arguments are written
 * out by hand, as an app does its business validation (§7.3), and match
 * the input schema they declare.
 */
final class Tools {
    private Tools() {}

    static final String READ = "tasks.read";
    static final String WRITE = "tasks.write";
    static final String MANAGE = "tasks.manage";

    static final String GET_STATS = "get_stats";
    static final String LIST_TASKS = "list_tasks";
    static final String ADD_TASK = "add_task";
    static final String DELETE_TASK = "delete_task";
    static final String COMPLETE_TASKS = "complete_tasks";
    static final String EXPORT_TASKS = "export_tasks";

    static final Pattern TASK_ID = Pattern.compile("t[0-9]{1,12}");
    /** complete_tasks goes to the background for more ids than this, or for all tasks. */
    static final int ASYNC_ABOVE = 20;

    static final class Tool {
        final String name;
        final String effect;
        final String risk;
        final boolean destructive;
        final boolean idempotent;
        final String confirmation;
        final boolean mayRunInBackground;
        final List<String> scopes;
        final String title;
        final String description;
        final String inputSchema;
        final String outputSchema;

        Tool(String name, String title, String description, String effect, String risk, boolean destructive,
                boolean idempotent, String confirmation, boolean mayRunInBackground, List<String> scopes,
                String inputSchema, String outputSchema) {
            this.name = name;
            this.title = title;
            this.description = description;
            this.effect = effect;
            this.risk = risk;
            this.destructive = destructive;
            this.idempotent = idempotent;
            this.confirmation = confirmation;
            this.mayRunInBackground = mayRunInBackground;
            this.scopes = scopes;
            this.inputSchema = inputSchema;
            this.outputSchema = outputSchema;
        }

        boolean isRead() {
            return effect.equals("read");
        }

        /** The descriptor a session sees: sync_or_async only where async_operations was negotiated (§3.4). */
        JSONObject descriptor(boolean async) throws JSONException {
            JSONObject annotations = new JSONObject()
                    .put("effect", effect)
                    .put("risk", risk)
                    .put("destructive", destructive)
                    .put("idempotent", idempotent)
                    .put("open_world", false)
                    .put("confirmation", confirmation)
                    .put("execution", mayRunInBackground && async ? "sync_or_async" : "sync");
            return new JSONObject()
                    .put("name", name)
                    .put("title", title)
                    .put("description", description)
                    .put("input_schema", new JSONObject(inputSchema))
                    .put("output_schema", new JSONObject(outputSchema))
                    .put("scopes", new JSONArray(scopes))
                    .put("annotations", annotations);
        }
    }

    static final Map<String, Tool> ALL = new LinkedHashMap<>();

    private static void add(Tool t) {
        ALL.put(t.name, t);
    }

    static {
        add(new Tool(GET_STATS, "Task statistics", "How many tasks there are and how many changes were committed.",
                "read", "low", false, true, "never", false, List.of(READ),
                "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}",
                "{\"type\":\"object\",\"properties\":{\"tasks\":{\"type\":\"integer\",\"minimum\":0},"
                        + "\"effects\":{\"type\":\"integer\",\"minimum\":0}},\"required\":[\"tasks\",\"effects\"]}"));
        add(new Tool(LIST_TASKS, "List tasks", "Lists the user's tasks.",
                "read", "low", false, true, "never", false, List.of(READ),
                "{\"type\":\"object\",\"properties\":{\"include_done\":{\"type\":\"boolean\"}},"
                        + "\"additionalProperties\":false}",
                "{\"type\":\"object\",\"properties\":{\"tasks\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
                        + "\"properties\":{\"task_id\":{\"type\":\"string\"},\"title\":{\"type\":\"string\"},"
                        + "\"done\":{\"type\":\"boolean\"}},\"required\":[\"task_id\",\"title\",\"done\"]}}},"
                        + "\"required\":[\"tasks\"]}"));
        add(new Tool(ADD_TASK, "Add a task", "Adds a task. An urgent task notifies the user's team, so the app asks first.",
                "create", "moderate", false, false, "provider_policy", false, List.of(WRITE),
                "{\"type\":\"object\",\"properties\":{\"title\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":200},"
                        + "\"urgent\":{\"type\":\"boolean\"}},\"required\":[\"title\"],\"additionalProperties\":false}",
                "{\"type\":\"object\",\"properties\":{\"task_id\":{\"type\":\"string\"}},\"required\":[\"task_id\"]}"));
        add(new Tool(DELETE_TASK, "Delete a task", "Deletes one task for good, after the user confirms it in the app.",
                "delete", "high", true, false, "always", false, List.of(WRITE),
                "{\"type\":\"object\",\"properties\":{\"task_id\":{\"type\":\"string\",\"pattern\":\"^t[0-9]{1,12}$\"}},"
                        + "\"required\":[\"task_id\"],\"additionalProperties\":false}",
                "{\"type\":\"object\",\"properties\":{\"deleted\":{\"type\":\"boolean\"}},\"required\":[\"deleted\"]}"));
        add(new Tool(COMPLETE_TASKS, "Complete tasks",
                "Marks tasks done: the ones named, or all of them. Many tasks are completed in the background.",
                "update", "moderate", false, true, "never", true, List.of(MANAGE),
                "{\"type\":\"object\",\"properties\":{\"task_ids\":{\"type\":\"array\",\"maxItems\":100,"
                        + "\"items\":{\"type\":\"string\",\"pattern\":\"^t[0-9]{1,12}$\"}},\"all\":{\"type\":\"boolean\"}},"
                        + "\"additionalProperties\":false}",
                "{\"type\":\"object\",\"properties\":{\"completed\":{\"type\":\"integer\",\"minimum\":0}},"
                        + "\"required\":[\"completed\"]}"));
        add(new Tool(EXPORT_TASKS, "Export tasks", "Exports the task list as text lines, repeated `copies` times.",
                "read", "low", false, true, "never", false, List.of(READ),
                "{\"type\":\"object\",\"properties\":{\"copies\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":20000}},"
                        + "\"required\":[\"copies\"],\"additionalProperties\":false}",
                "{\"type\":\"object\",\"properties\":{\"lines\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}},"
                        + "\"required\":[\"lines\"]}"));
    }

    static Envelope.Refusal invalidArgs(String message) {
        return new Envelope.Refusal("INVALID_ARGS", message, false);
    }

    /** Checks {@code args} against the tool's input schema; the business checks come after. */
    static void validate(Tool tool, JSONObject args) throws Envelope.Refusal {
        Iterator<String> keys = args.keys();
        List<String> allowed = new ArrayList<>();
        switch (tool.name) {
            case GET_STATS:
                break;
            case LIST_TASKS:
                allowed.add("include_done");
                optBoolean(args, "include_done");
                break;
            case ADD_TASK: {
                allowed.add("title");
                allowed.add("urgent");
                Object title = args.opt("title");
                if (!(title instanceof String)) {
                    throw invalidArgs("title must be a string");
                }
                int n = ((String) title).codePointCount(0, ((String) title).length());
                if (n < 1 || n > 200) {
                    throw invalidArgs("title must hold 1 to 200 characters");
                }
                optBoolean(args, "urgent");
                break;
            }
            case DELETE_TASK: {
                allowed.add("task_id");
                Object id = args.opt("task_id");
                if (!(id instanceof String) || !TASK_ID.matcher((String) id).matches()) {
                    throw invalidArgs("task_id must be a task id (t followed by digits)");
                }
                break;
            }
            case COMPLETE_TASKS: {
                allowed.add("task_ids");
                allowed.add("all");
                optBoolean(args, "all");
                if (args.has("task_ids")) {
                    Object ids = args.opt("task_ids");
                    if (!(ids instanceof JSONArray) || ((JSONArray) ids).length() > 100) {
                        throw invalidArgs("task_ids must be an array of at most 100 task ids");
                    }
                    for (int i = 0; i < ((JSONArray) ids).length(); i++) {
                        Object id = ((JSONArray) ids).opt(i);
                        if (!(id instanceof String) || !TASK_ID.matcher((String) id).matches()) {
                            throw invalidArgs("task_ids[" + i + "] is not a task id");
                        }
                    }
                }
                break;
            }
            case EXPORT_TASKS: {
                allowed.add("copies");
                Object copies = args.opt("copies");
                if (!(copies instanceof Integer) || (Integer) copies < 1 || (Integer) copies > 20000) {
                    throw invalidArgs("copies must be an integer from 1 to 20000");
                }
                break;
            }
            default:
                throw new IllegalStateException("no rules for " + tool.name);
        }
        while (keys.hasNext()) {
            String k = keys.next();
            if (!allowed.contains(k)) {
                throw invalidArgs("unknown argument " + k);
            }
        }
    }

    private static void optBoolean(JSONObject args, String key) throws Envelope.Refusal {
        if (args.has(key) && !(args.opt(key) instanceof Boolean)) {
            throw invalidArgs(key + " must be a boolean");
        }
    }

    /** Whether this call needs the user's confirmation in the app first (§3.4, §4.3). */
    static boolean needsConfirmation(Tool tool, JSONObject args) {
        if (tool.confirmation.equals("always")) {
            return true;
        }
        // The app's own policy: an urgent task notifies other people, a
        // higher runtime risk than the annotation's (§3.4).
        return tool.name.equals(ADD_TASK) && args.optBoolean("urgent", false);
    }

    /** Whether complete_tasks runs in the background for these args (when the session allows it). */
    static boolean wantsBackground(Tool tool, JSONObject args) {
        if (!tool.mayRunInBackground) {
            return false;
        }
        JSONArray ids = args.optJSONArray("task_ids");
        return args.optBoolean("all", false) || (ids != null && ids.length() > ASYNC_ABOVE);
    }
}
