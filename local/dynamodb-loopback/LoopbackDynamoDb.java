import java.lang.reflect.Field;
import java.lang.reflect.Method;

/**
 * Starts DynamoDB Local listening on one interface only. Its command line has no host option
 * and its Jetty server binds every interface, so this sets the host on Jetty's connectors
 * before starting it. Usage: java -Dcapstan.bindHost=127.0.0.1 LoopbackDynamoDb [DynamoDB Local options]
 */
public final class LoopbackDynamoDb {
  public static void main(String[] args) throws Exception {
    String host = System.getProperty("capstan.bindHost", "127.0.0.1");
    Class<?> runner = Class.forName("software.amazon.dynamodb.services.local.main.ServerRunner");
    Object proxy = runner.getMethod("createServerFromCommandLineArgs", String[].class).invoke(null, (Object) args);
    Field serverField = proxy.getClass().getDeclaredField("server");
    serverField.setAccessible(true);
    Object server = serverField.get(proxy);
    Object[] connectors = (Object[]) server.getClass().getMethod("getConnectors").invoke(server);
    if (connectors.length == 0) throw new IllegalStateException("DynamoDB Local has no connector to bind");
    for (Object connector : connectors) {
      Method setHost = connector.getClass().getMethod("setHost", String.class);
      setHost.invoke(connector, host);
    }
    proxy.getClass().getMethod("start").invoke(proxy);
  }
}
