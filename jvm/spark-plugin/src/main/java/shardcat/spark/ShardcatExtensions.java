package shardcat.spark;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.parser.ParserInterface;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;

import scala.runtime.AbstractFunction1;
import scala.runtime.AbstractFunction2;
import scala.runtime.BoxedUnit;

/**
 * The plugin's entry point ({@code spark.sql.extensions=shardcat.spark.ShardcatExtensions}): wraps
 * Spark's SQL parser so that every parsed plan goes through {@link QueryResolver} (one
 * {@code POST /resolve} for the catalog tables it names) before analysis.
 *
 * <p>The wrapper is a dynamic proxy over {@link ParserInterface}: it forwards every method to
 * Spark's parser, so it keeps working when a Spark release adds one.
 */
public final class ShardcatExtensions extends AbstractFunction1<SparkSessionExtensions, BoxedUnit> {

  @Override
  public BoxedUnit apply(SparkSessionExtensions extensions) {
    extensions.injectParser(new AbstractFunction2<SparkSession, ParserInterface, ParserInterface>() {
      @Override
      public ParserInterface apply(SparkSession session, ParserInterface parser) {
        return wrap(session, parser);
      }
    });
    return BoxedUnit.UNIT;
  }

  static ParserInterface wrap(SparkSession session, ParserInterface parser) {
    QueryResolver resolver = new QueryResolver(session, parser);
    return (ParserInterface) Proxy.newProxyInstance(
        ShardcatExtensions.class.getClassLoader(), new Class<?>[] {ParserInterface.class},
        (proxy, method, args) -> {
          Object result;
          try {
            result = method.invoke(parser, args);
          } catch (InvocationTargetException e) {
            throw e.getCause();
          }
          String name = method.getName();
          if (name.startsWith("parsePlan")) {       // parsePlan, and parsePlanWithParameters (spark.sql)
            return resolver.prepare((LogicalPlan) result);
          }
          if (name.equals("parseMultipartIdentifier")) {   // spark.table(...) and DataFrame reads by name
            Governed.refuseMarker(String.valueOf(args[0]));
          }
          return result;
        });
  }
}
