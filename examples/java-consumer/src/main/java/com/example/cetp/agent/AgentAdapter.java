package com.example.cetp.agent;

import android.content.Context;
import com.clawseed.probe.consumer.ConsumerAdapter;
import com.clawseed.probe.consumer.Outcome;

/**
 * The few lines a Consumer vendor writes to certify their client on the JVM
 * device: each act of {@code cetp consumer} is one call of the client, and
 * the client's result is the act's outcome.
 */
public final class AgentAdapter implements ConsumerAdapter {
    private CetpClient client;

    @Override
    public void start(Context context) {
        client = new CetpClient(context, new CetpClient.Limits());
    }

    @Override
    public Outcome connect(String authority) {
        return outcome(client.connect(authority));
    }

    @Override
    public Outcome listTools(String authority) {
        return outcome(client.listTools(authority));
    }

    @Override
    public Outcome callTool(String authority, String tool, String argsJson) throws InterruptedException {
        return outcome(client.call(authority, tool, argsJson, false));
    }

    @Override
    public Outcome cancelTool(String authority, String tool, String argsJson) throws InterruptedException {
        return outcome(client.call(authority, tool, argsJson, true));
    }

    @Override
    public Outcome userDecision(String decision, User user) throws Exception {
        return outcome(client.decide(decision, user::launch));
    }

    @Override
    public Outcome reset() {
        client.reset();
        return Outcome.success(null);
    }

    private static Outcome outcome(CetpClient.Result r) {
        switch (r.kind) {
            case "success":
                return Outcome.success(r.valueJson);
            case "error":
                return Outcome.error(r.code, r.text);
            case "needs_user":
                return Outcome.needsUser(r.text);
            default:
                return Outcome.refused(r.text);
        }
    }
}
