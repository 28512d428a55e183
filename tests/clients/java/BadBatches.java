// Bad batches through JDBC, for tests/clients/test_bad_batches.py:
//   java -cp mariadb-java-client.jar BadBatches.java JDBC_URL TOPIC
// reads one p_messages document a line on stdin, calls queue_publish_batch(TOPIC, line) and prints
// "STORED\t<rows>" or "REFUSED\t<errno>\t<message>" for each.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.sql.CallableStatement;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;

public class BadBatches {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        try (Connection conn = DriverManager.getConnection(args[0])) {
            String line;
            while ((line = in.readLine()) != null) {
                try (CallableStatement cs = conn.prepareCall("{call queue_publish_batch(?, ?)}")) {
                    cs.setString(1, args[1]);
                    cs.setString(2, line);
                    int rows = 0;
                    try (ResultSet rs = cs.executeQuery()) {
                        while (rs.next()) rows++;
                    }
                    System.out.println("STORED\t" + rows);
                } catch (SQLException e) {
                    System.out.println("REFUSED\t" + e.getErrorCode() + "\t" + e.getMessage());
                }
            }
        }
    }
}
