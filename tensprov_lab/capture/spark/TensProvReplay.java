// Replays a few records in the driver, without a Spark job (see _replay._local).
//
// A recomputation of a few records reads them from the keyed sources that the first
// recomputation cached, then pushes them through the user's operations.  Run as a Spark
// job, that costs a job's scheduling (about 40 ms on two cores) for a handful of rows.
// Here the cached batches holding the wanted keys are read from this JVM's block manager
// (local mode, or blocks this driver holds), the frontier becomes LocalRelations, and
// Spark's own optimizer folds projections and filters over them (ConvertToLocalRelation);
// joins, sorts and unions of local relations, which it leaves alone, are evaluated here
// with their own conditions and orderings.  Whatever else the plan holds (aggregates,
// windows, Python UDFs) makes a method answer null, and the caller runs the replay as a
// Spark job instead.
//
// Compiled with Janino apart from TensProvHelper (whose replies it answers with), so that
// a Spark build whose internals differ loses only this shortcut.  Janino reads Java
// without generics or lambdas.

import java.util.ArrayList;
import java.util.Arrays;

import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.BasePredicate;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.JoinedRow;
import org.apache.spark.sql.catalyst.plans.logical.Join;
import org.apache.spark.sql.catalyst.plans.logical.LocalRelation;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Sort;
import org.apache.spark.sql.catalyst.plans.logical.Union;
import org.apache.spark.sql.execution.CachedData;
import org.apache.spark.sql.execution.columnar.CachedRDDBuilder;
import org.apache.spark.sql.execution.columnar.ColumnarIterator;
import org.apache.spark.sql.execution.columnar.DefaultCachedBatch;
import org.apache.spark.sql.execution.columnar.InMemoryRelation;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.storage.BlockResult;
import org.apache.spark.storage.RDDBlockId;

public class TensProvReplay {
    /** Column statistics a cached batch keeps per column: lower, upper, nulls, count, size. */
    private static final int STATS = 5;

    private static scala.collection.immutable.Seq seq(ArrayList items) {
        return scala.jdk.javaapi.CollectionConverters.asScala(items).toSeq();
    }

    /**
     * The records of a cached plan whose long column {@code key} holds one of the keys
     * in {@code keyBytes} (sorted, eight bytes each, big-endian), read from this JVM's
     * block manager, as a LocalRelation with the plan's own output; null when the plan
     * is not cached, its cache is not loaded, a block lives elsewhere, or the cache is
     * not Spark's default columnar one.
     */
    public LogicalPlan cachedRecords(
            org.apache.spark.sql.classic.SparkSession session,
            LogicalPlan plan,
            Attribute key,
            byte[] keyBytes) {
        try {
            return readCached(session, plan, key, keyBytes);
        } catch (RuntimeException e) {
            failure = e.toString();
            return null;
        }
    }

    /** The last error that made a call answer null, "" while there was none (in this
     *  JVM: the tests read it). */
    public String failure = "";

    public String getFailure() {
        return failure;
    }

    private LogicalPlan readCached(
            org.apache.spark.sql.classic.SparkSession session,
            LogicalPlan plan,
            Attribute key,
            byte[] keyBytes) {
        long[] keys = new long[keyBytes.length / 8];
        java.nio.ByteBuffer.wrap(keyBytes).asLongBuffer().get(keys);
        scala.Option found = session.sharedState().cacheManager().lookupCachedData(session, plan);
        if (found.isEmpty()) {
            return null;
        }
        InMemoryRelation relation = ((CachedData) found.get()).cachedRepresentation();
        CachedRDDBuilder builder = relation.cacheBuilder();
        if (!builder.isCachedColumnBuffersLoaded()) {
            return null;
        }
        scala.collection.immutable.Seq cachedOut = relation.output();
        scala.collection.immutable.Seq planOut = plan.output();
        int n = planOut.size();
        if (cachedOut.size() != n) {
            return null;
        }
        DataType[] types = new DataType[n];
        int[] columns = new int[n];
        ArrayList typeList = new ArrayList();
        int k = -1;
        for (int i = 0; i < n; i++) {
            Attribute mine = (Attribute) planOut.apply(i);
            Attribute cached = (Attribute) cachedOut.apply(i);
            if (!mine.dataType().equals(cached.dataType())) {
                return null;
            }
            types[i] = cached.dataType();
            typeList.add(types[i]);
            columns[i] = i;
            if (mine.exprId().equals(key.exprId())) {
                k = i;
            }
        }
        if (k < 0 || !(types[k] instanceof LongType)) {
            return null;
        }
        RDD rdd = builder.cachedColumnBuffers();
        Object blocks = blockManager();
        if (blocks == null) {
            return null;
        }
        ArrayList wanted = new ArrayList();
        boolean usable = true;
        for (int p = 0; p < rdd.getNumPartitions() && usable; p++) {
            scala.Option got = localValues(blocks, new RDDBlockId(rdd.id(), p));
            if (got.isEmpty()) {
                usable = false;
                break;
            }
            scala.collection.Iterator data = ((BlockResult) got.get()).data();
            try {
                while (data.hasNext()) {
                    Object item = data.next();
                    if (!(item instanceof DefaultCachedBatch)) {
                        usable = false;
                        break;
                    }
                    DefaultCachedBatch batch = (DefaultCachedBatch) item;
                    InternalRow stats = batch.stats();
                    if (stats.isNullAt(STATS * k) || stats.isNullAt(STATS * k + 1)) {
                        continue;
                    }
                    long lower = stats.getLong(STATS * k);
                    long upper = stats.getLong(STATS * k + 1);
                    int at = Arrays.binarySearch(keys, lower);
                    if (at < 0) {
                        at = -at - 1;
                    }
                    if (at < keys.length && keys[at] <= upper) {
                        wanted.add(batch);
                    }
                }
            } finally {
                // read to the end: the block's read lock is released when its iterator
                // is done, and a lock left held would stall unpersisting it for good
                while (data.hasNext()) {
                    data.next();
                }
            }
        }
        if (!usable) {
            return null;
        }
        ArrayList rows = new ArrayList();
        if (!wanted.isEmpty()) {
            ColumnarIterator it = (ColumnarIterator)
                org.apache.spark.sql.execution.columnar.GenerateColumnAccessor.generate(seq(typeList));
            it.initialize(scala.jdk.javaapi.CollectionConverters.asScala(wanted.iterator()), types, columns);
            while (it.hasNext()) {
                InternalRow row = (InternalRow) it.next();
                if (!row.isNullAt(k) && Arrays.binarySearch(keys, row.getLong(k)) >= 0) {
                    rows.add(row.copy());
                }
            }
        }
        return new LocalRelation(planOut, seq(rows), false, scala.None$.MODULE$);
    }

    private java.lang.invoke.MethodHandle getLocalValues;

    /** This JVM's block manager, or null.  It and the two methods below are reached
     *  through method handles: Janino reads every method of a class it calls, and some
     *  of SparkEnv's and BlockManager's name classes that are not on the class path
     *  (Spark Connect's protobuf). */
    private static Object blockManager() {
        try {
            java.lang.invoke.MethodHandles.Lookup lookup = java.lang.invoke.MethodHandles.publicLookup();
            Class env = Class.forName("org.apache.spark.SparkEnv");
            Object current = lookup.findStatic(env, "get", java.lang.invoke.MethodType.methodType(env))
                .invokeWithArguments(new Object[0]);
            if (current == null) {
                return null;
            }
            Class manager = Class.forName("org.apache.spark.storage.BlockManager");
            return lookup.findVirtual(env, "blockManager", java.lang.invoke.MethodType.methodType(manager))
                .invokeWithArguments(new Object[] {current});
        } catch (Throwable e) {
            return null;
        }
    }

    /** {@code BlockManager.getLocalValues(id)}, or an empty Option when it fails. */
    private scala.Option localValues(Object blocks, RDDBlockId id) {
        try {
            if (getLocalValues == null) {
                getLocalValues = java.lang.invoke.MethodHandles.publicLookup().findVirtual(
                    blocks.getClass(),
                    "getLocalValues",
                    java.lang.invoke.MethodType.methodType(
                        scala.Option.class, org.apache.spark.storage.BlockId.class));
            }
            return (scala.Option) getLocalValues.invokeWithArguments(new Object[] {blocks, id});
        } catch (Throwable e) {
            return scala.Option.empty();
        }
    }

    /**
     * Runs a plan whose leaves are local relations in the driver and answers its records
     * as an Arrow IPC stream (base64 text, as a {@code replies} reply), or null when the
     * plan holds an operation this cannot evaluate.  {@code pairs} bounds the record
     * pairs a join may compare.
     */
    public String run(
            org.apache.spark.sql.classic.SparkSession session,
            LogicalPlan plan,
            long pairs,
            boolean largeVarTypes,
            TensProvHelper replies) {
        scala.Option before = org.apache.spark.sql.classic.SparkSession.getActiveSession();
        // the optimizer's rules read the configuration of the active session
        org.apache.spark.sql.classic.SparkSession.setActiveSession(session);
        try {
            // analysed as a Dataset of it would be: the capture's rewritten plans may
            // carry stale nullability, which evaluation trusts
            LogicalPlan current = analyzed(session, plan);
            for (int round = 0; round < 16; round++) {
                current = (LogicalPlan) session.sessionState().optimizer().execute(current);
                if (current instanceof LocalRelation) {
                    String text = arrow(session, (LocalRelation) current, largeVarTypes);
                    return text == null ? null : replies.reply(text);
                }
                long[] budget = new long[] {pairs};
                LogicalPlan folded = fold(current, budget);
                if (folded == null) {
                    return null;
                }
                current = folded;
            }
            return null;
        } catch (RuntimeException e) {
            // the caller replays as a Spark job instead, which reports real errors
            failure = e.toString();
            return null;
        } finally {
            if (before.isDefined()) {
                org.apache.spark.sql.classic.SparkSession.setActiveSession(
                    (org.apache.spark.sql.SparkSession) before.get());
            } else {
                org.apache.spark.sql.classic.SparkSession.clearActiveSession();
            }
        }
    }

    /** {@code plan} with its joins, sorts and unions of local relations evaluated, or null
     *  when there is none (or a join would compare more pairs than {@code budget} allows). */
    private LogicalPlan fold(LogicalPlan plan, long[] budget) {
        if (plan instanceof Join) {
            Join join = (Join) plan;
            if (join.left() instanceof LocalRelation && join.right() instanceof LocalRelation) {
                return join(join, (LocalRelation) join.left(), (LocalRelation) join.right(), budget);
            }
        }
        if (plan instanceof Sort && ((Sort) plan).child() instanceof LocalRelation) {
            Sort sort = (Sort) plan;
            LocalRelation child = (LocalRelation) sort.child();
            Object[] rows = rowsOf(child);
            // Spark's interpreted ordering is a java.util.Comparator of rows
            Arrays.sort(rows, new org.apache.spark.sql.catalyst.expressions.InterpretedOrdering(
                sort.order(), child.output()));
            return new LocalRelation(
                child.output(), seq(new ArrayList(Arrays.asList(rows))), false, scala.None$.MODULE$);
        }
        if (plan instanceof Union) {
            scala.collection.immutable.Seq kids = plan.children();
            ArrayList rows = new ArrayList();
            boolean local = true;
            for (int i = 0; i < kids.size() && local; i++) {
                Object kid = kids.apply(i);
                if (kid instanceof LocalRelation) {
                    scala.collection.Iterator it = ((LocalRelation) kid).data().iterator();
                    while (it.hasNext()) {
                        rows.add(it.next());
                    }
                } else {
                    local = false;
                }
            }
            if (local) {
                return new LocalRelation(plan.output(), seq(rows), false, scala.None$.MODULE$);
            }
        }
        scala.collection.immutable.Seq kids = plan.children();
        ArrayList out = new ArrayList();
        boolean changed = false;
        for (int i = 0; i < kids.size(); i++) {
            LogicalPlan kid = (LogicalPlan) kids.apply(i);
            LogicalPlan folded = fold(kid, budget);
            if (folded != null) {
                changed = true;
                out.add(folded);
            } else {
                out.add(kid);
            }
        }
        return changed ? (LogicalPlan) plan.withNewChildren(seq(out)) : null;
    }

    /** A join of two local relations as one, compared pair by pair with the join's own
     *  condition (Spark's null semantics included); null for a join type not covered. */
    private LogicalPlan join(Join join, LocalRelation left, LocalRelation right, long[] budget) {
        String type = join.joinType().sql();
        boolean inner = type.equals("INNER") || type.equals("CROSS");
        boolean keepLeft = type.equals("LEFT OUTER") || type.equals("FULL OUTER");
        boolean keepRight = type.equals("RIGHT OUTER") || type.equals("FULL OUTER");
        boolean semi = type.equals("LEFT SEMI");
        boolean anti = type.equals("LEFT ANTI");
        if (!(inner || keepLeft || keepRight || semi || anti)) {
            return null;
        }
        Object[] ls = rowsOf(left);
        Object[] rs = rowsOf(right);
        budget[0] -= (long) ls.length * (long) rs.length;
        if (budget[0] < 0) {
            return null;
        }
        BasePredicate test = null;
        if (join.condition().isDefined()) {
            ArrayList both = new ArrayList();
            addAll(both, left.output());
            addAll(both, right.output());
            Expression bound = (Expression)
                org.apache.spark.sql.catalyst.expressions.BindReferences$.MODULE$.bindReference(
                    (Expression) join.condition().get(),
                    new org.apache.spark.sql.catalyst.expressions.package$AttributeSeq(seq(both)),
                    false);
            test = new org.apache.spark.sql.catalyst.expressions.InterpretedPredicate(bound);
            test.initialize(0);
        }
        InternalRow noLeft = new GenericInternalRow(left.output().size());
        InternalRow noRight = new GenericInternalRow(right.output().size());
        boolean[] rightMatched = new boolean[rs.length];
        ArrayList rows = new ArrayList();
        JoinedRow pair = new JoinedRow();
        for (int i = 0; i < ls.length; i++) {
            InternalRow l = (InternalRow) ls[i];
            boolean matched = false;
            for (int j = 0; j < rs.length; j++) {
                InternalRow r = (InternalRow) rs[j];
                pair.apply(l, r);
                if (test == null || test.eval(pair)) {
                    matched = true;
                    rightMatched[j] = true;
                    if (!semi && !anti) {
                        rows.add(pair.copy());
                    }
                }
            }
            if (semi && matched || anti && !matched) {
                rows.add(l);
            } else if (keepLeft && !matched) {
                rows.add(new JoinedRow(l, noRight).copy());
            }
        }
        if (keepRight) {
            for (int j = 0; j < rs.length; j++) {
                if (!rightMatched[j]) {
                    rows.add(new JoinedRow(noLeft, (InternalRow) rs[j]).copy());
                }
            }
        }
        return new LocalRelation(join.output(), seq(rows), false, scala.None$.MODULE$);
    }

    private static Object[] rowsOf(LocalRelation relation) {
        ArrayList rows = new ArrayList();
        scala.collection.Iterator it = relation.data().iterator();
        while (it.hasNext()) {
            rows.add(it.next());
        }
        return rows.toArray();
    }

    private static void addAll(ArrayList into, scala.collection.immutable.Seq items) {
        for (int i = 0; i < items.size(); i++) {
            into.add(items.apply(i));
        }
    }

    /** The records of a local relation as an Arrow IPC stream, base64. */
    private String arrow(
            org.apache.spark.sql.classic.SparkSession session,
            LocalRelation relation,
            boolean largeVarTypes) {
        StructType schema = relation.schema();
        String zone = session.sessionState().conf().sessionLocalTimeZone();
        org.apache.spark.sql.execution.arrow.ArrowConverters$ arrow =
            org.apache.spark.sql.execution.arrow.ArrowConverters$.MODULE$;
        scala.collection.Iterator batches = arrow.toBatchWithSchemaIterator(
            relation.data().iterator(), schema, Long.MAX_VALUE, Long.MAX_VALUE, zone, false,
            largeVarTypes);
        byte[] bytes = batches.hasNext()
            ? (byte[]) batches.next()
            : arrow.createEmptyArrowBatch(schema, zone, false, largeVarTypes);
        if (batches.hasNext()) {
            return null;
        }
        return java.util.Base64.getEncoder().encodeToString(bytes);
    }

    private static LogicalPlan analyzed(
            org.apache.spark.sql.classic.SparkSession session, LogicalPlan plan) {
        return session.sessionState().analyzer().executeAndCheck(
            plan, new org.apache.spark.sql.catalyst.QueryPlanningTracker(scala.None$.MODULE$));
    }

    /** The schema of a plan, analysed, as JSON (pyspark's form), as a {@code replies}
     *  reply. */
    public String schemaJson(
            org.apache.spark.sql.classic.SparkSession session,
            LogicalPlan plan,
            TensProvHelper replies) {
        return replies.reply(analyzed(session, plan).schema().json());
    }
}
