package shardcat.spark;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;

import org.apache.spark.sql.catalyst.analysis.UnresolvedRelation;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.SubqueryExpression;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.UnresolvedWith;

import scala.Product;
import scala.jdk.javaapi.CollectionConverters;

/** Walks a parsed (unresolved) plan, subqueries included: the relations it names and the CTE names it defines. */
final class QueryNames {
  private QueryNames() {}

  /** Every UnresolvedRelation read by the plan (write targets, which carry write privileges, left out). */
  static List<UnresolvedRelation> relations(LogicalPlan plan) {
    List<UnresolvedRelation> out = new ArrayList<>();
    walk(plan, out, new HashSet<>());
    return out;
  }

  /** Lower-cased names of every CTE the plan defines (one-part names that are not catalog tables). */
  static Set<String> cteNames(LogicalPlan plan) {
    Set<String> out = new HashSet<>();
    walk(plan, new ArrayList<>(), out);
    return out;
  }

  static boolean isWriteTarget(UnresolvedRelation r) {
    return r.options().containsKey(UnresolvedRelation.REQUIRED_WRITE_PRIVILEGES());
  }

  private static void walk(LogicalPlan plan, List<UnresolvedRelation> relations, Set<String> ctes) {
    if (plan instanceof UnresolvedRelation r) {
      if (!isWriteTarget(r)) {
        relations.add(r);
      }
      return;
    }
    if (plan instanceof UnresolvedWith with) {
      for (Object cte : CollectionConverters.asJava(with.cteRelations())) {   // (name, plan, ...) by release
        Product named = (Product) cte;
        ctes.add(((String) named.productElement(0)).toLowerCase(Locale.ROOT));
        walk((LogicalPlan) named.productElement(1), relations, ctes);
      }
    }
    for (LogicalPlan child : CollectionConverters.asJava(plan.children())) {
      walk(child, relations, ctes);
    }
    for (Expression e : CollectionConverters.asJava(plan.expressions())) {
      walkExpression(e, relations, ctes);
    }
  }

  private static void walkExpression(Expression e, List<UnresolvedRelation> relations, Set<String> ctes) {
    if (e instanceof SubqueryExpression sub) {
      walk(sub.plan(), relations, ctes);
    }
    for (Expression child : CollectionConverters.asJava(e.children())) {
      walkExpression(child, relations, ctes);
    }
  }
}
