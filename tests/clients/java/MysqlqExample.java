// mysqlq from Java with JDBC (CallableStatement). docs/clients.md shows this code and
// tests/clients/test_jdbc.py runs it:
//   java -cp mariadb-java-client.jar MysqlqExample.java JDBC_URL TOPIC
// publishes a few messages to TOPIC, consumes them as group "jdbc" (one message fails every
// time and one is poison) and prints one tab-separated line per step.

import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.sql.CallableStatement;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Types;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.function.BooleanSupplier;
import java.util.function.IntToLongFunction;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

public class MysqlqExample {

    // Where a message is: a duplicate (its id was published before) has the first copy's offset.
    record Published(long partitionId, long offset, boolean duplicate, String id) {}

    // Publish one message (inside the connection's transaction, if one is open).
    static Published publish(Connection conn, String topic, String key, String id, byte[] payload,
                            String metadataJson) throws SQLException {
        try (CallableStatement cs = conn.prepareCall("{call queue_publish(?, ?, ?, ?, ?, ?)}")) {
            cs.setString(1, topic);
            cs.setString(2, key);                 // null: unkeyed
            cs.setString(3, id);                  // null: the server makes one up
            cs.setBytes(4, payload);              // stored byte for byte
            cs.setString(5, metadataJson);        // a JSON object, or null
            cs.setLong(6, 0);                     // delay in ms
            try (ResultSet rs = cs.executeQuery()) {
                rs.next();
                return new Published(rs.getLong("partition_id"), rs.getLong("offset"),
                    rs.getBoolean("duplicate"), rs.getString("id"));
            }
        }
    }

    // One fetched message, as queue_fetch returns it.
    record Message(long partitionId, long offset, long token, int attempt, String key, String id,
                   byte[] payload, String metadata) {
        String delivery() {                       // the [partition_id, offset, token] handle
            return "[" + partitionId + ", " + offset + ", " + token + "]";
        }
    }

    interface Handler { void handle(Message msg) throws Exception; }

    // Thrown by a handler for a message that can never succeed: it goes to the DLQ at once.
    static class PoisonMessage extends Exception {
        PoisonMessage(String reason) { super(reason); }
    }

    // p_error holds up to 65535 bytes: 10000 characters always fit.
    static String errorText(Exception e) {
        String text = String.valueOf(e.getMessage());
        int n = text.codePointCount(0, text.length());
        return n <= 10000 ? text : text.substring(0, text.offsetByCodePoints(0, 10000));
    }

    static void bind(CallableStatement cs, Object... args) throws SQLException {
        for (int i = 0; i < args.length; i++) {
            if (args[i] == null) cs.setNull(i + 1, Types.VARCHAR);
            else cs.setObject(i + 1, args[i]);
        }
    }

    // CALL a procedure for what it does (its one result row is not needed here).
    static void call(Connection conn, String sql, Object... args) throws SQLException {
        try (CallableStatement cs = conn.prepareCall(sql)) {
            bind(cs, args);
            cs.execute();
        }
    }

    static List<Message> fetch(Connection conn, String group, String topic, String me)
            throws SQLException {
        try (CallableStatement cs = conn.prepareCall("{call queue_fetch(?, ?, ?, ?, ?, ?, ?)}")) {
            bind(cs, group, topic, me, 10, 60000, 100, null);  // batch, visibility ms, max rows
            List<Message> rows = new ArrayList<>();
            try (ResultSet rs = cs.executeQuery()) {
                while (rs.next()) {
                    rows.add(new Message(rs.getLong("partition_id"), rs.getLong("offset"),
                        rs.getLong("token"), rs.getInt("attempt"), rs.getString("partition_key"),
                        rs.getString("id"), rs.getBytes("payload"), rs.getString("metadata")));
                }
            }
            return rows;
        }
    }

    // A consumer of topic in group, as docs/protocol.md ("A consumer's loop") describes it:
    // handle() returns to ack, throws to nack (after maxAttempts attempts the nack moves the
    // message to the group's DLQ), or throws PoisonMessage to dead-letter it now. Autocommit on:
    // every procedure runs its own transaction.
    static void consume(Connection conn, String group, String topic, String me, int maxAttempts,
                        Handler handler, IntToLongFunction backoffMs, BooleanSupplier stop)
            throws Exception {
        long leaseMs = 30000;
        call(conn, "{call queue_subscribe(?, ?, ?, ?, ?, ?, ?)}",
            group, topic, me, maxAttempts, null, leaseMs, null);
        long nextTick = 0;
        try {
            while (!stop.getAsBoolean()) {
                if (System.currentTimeMillis() >= nextTick) {   // the lease tick
                    call(conn, "{call queue_acquire_leases(?, ?, ?, ?, ?)}",
                        group, topic, me, leaseMs, null);
                    nextTick = System.currentTimeMillis() + leaseMs / 3;
                }
                List<Message> rows = fetch(conn, group, topic, me);
                if (rows.isEmpty()) {
                    Thread.sleep(50);
                    continue;
                }
                List<String> acked = new ArrayList<>();
                for (Message msg : rows) {                      // one key's messages in order
                    try {
                        handler.handle(msg);
                        acked.add(msg.delivery());
                    } catch (PoisonMessage e) {
                        call(conn, "{call queue_dead_letter(?, ?, ?, ?)}",
                            group, "[" + msg.delivery() + "]", errorText(e), null);
                    } catch (Exception e) {                     // retried after the backoff
                        call(conn, "{call queue_nack(?, ?, ?, ?, ?)}", group, "[" + msg.delivery()
                            + "]", backoffMs.applyAsLong(msg.attempt()), errorText(e), null);
                    }
                }
                if (!acked.isEmpty()) {
                    String deliveries = "[" + String.join(", ", acked) + "]";
                    call(conn, "{call queue_ack(?, ?, ?)}", group, deliveries, null);
                }
            }
        } finally {
            call(conn, "{call queue_deregister(?, ?, ?, ?)}", group, topic, me, null);
        }
    }

    // The code (MQ001 ...) of an error a procedure raised: SQLSTATE 45000, errno 1644, a message
    // that starts with the code (MariaDB Connector/J puts "(conn=N) " before it).
    static String mysqlqCode(SQLException e) {
        Matcher m = Pattern.compile("(?:^|\\) )(MQ\\d{3}) ").matcher(String.valueOf(e.getMessage()));
        return "45000".equals(e.getSQLState()) && m.find() ? m.group(1) : null;
    }

    static String sha256(byte[] data) throws Exception {
        return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(data));
    }

    public static void main(String[] argv) throws Exception {
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        String url = argv[0];
        String topic = argv[1];
        String key = "ключ-键-🔑";
        String text = "Привет, 世界! 😀";
        String metadata = "{\"note\": \"тест 测试 🚀\"}";
        String error = "ошибка: 处理失败 💥";
        byte[] big = new byte[1 << 20];
        for (int i = 0; i < big.length; i++) big[i] = (byte) i;
        try (Connection conn = DriverManager.getConnection(url)) {
            try (var st = conn.createStatement();
                 ResultSet rs = st.executeQuery("SELECT @@character_set_client, @@character_set_database")) {
                rs.next();
                out.println("CHARSETS\t" + rs.getString(1) + "\t" + rs.getString(2));
            }
            String[][] messages = {{"big", "k-big"}, {"text-😀", key}, {"fails-кириллица", key}, {"poison-🧪", key}};
            for (String[] m : messages) {
                byte[] payload = m[0].equals("big") ? big : text.getBytes(StandardCharsets.UTF_8);
                Published r = publish(conn, topic, m[1], m[0], payload, m[0].equals("big") ? null : metadata);
                out.println("PUBLISHED\t" + r.id() + "\t" + r.offset() + "\t" + (r.duplicate() ? 1 : 0));
            }
            Published again = publish(conn, topic, key, "text-😀", text.getBytes(StandardCharsets.UTF_8), metadata);
            out.println("PUBLISHED\t" + again.id() + "\t" + again.offset() + "\t" + (again.duplicate() ? 1 : 0));

            try {
                publish(conn, "not a topic!", null, null, new byte[0], null);
            } catch (SQLException e) {
                out.println("REFUSED\t" + e.getErrorCode() + "\t" + mysqlqCode(e) + "\t" + e.getMessage());
            }

            int maxAttempts = 2;
            java.util.Set<String> finished = new java.util.HashSet<>();
            long deadline = System.currentTimeMillis() + 20000;
            consume(conn, "jdbc", topic, "java-" + ProcessHandle.current().pid(), maxAttempts, msg -> {
                out.println("HANDLED\t" + msg.id() + "\t" + msg.attempt() + "\t" + msg.key() + "\t"
                    + sha256(msg.payload()) + "\t" + msg.metadata());
                if (msg.id().startsWith("poison-")) {
                    finished.add(msg.id());
                    throw new PoisonMessage(error);
                }
                if (msg.id().startsWith("fails-")) {
                    if (msg.attempt() >= maxAttempts) finished.add(msg.id());
                    throw new Exception(error);
                }
                finished.add(msg.id());
            }, attempt -> 0, // no backoff in this run; e.g. attempt -> Math.min(1000L << attempt, 300000)
                () -> finished.size() >= messages.length || System.currentTimeMillis() > deadline);
            out.println("DONE\t" + finished.size());
        } catch (SQLException e) {
            out.println("SQLERROR\t" + e.getErrorCode() + "\t" + e.getSQLState() + "\t" + e.getMessage());
            System.exit(1);
        }
    }
}
