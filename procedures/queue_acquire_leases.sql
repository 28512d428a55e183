{% import '_macros.sql' as m %}
-- One lease tick: heartbeat, renew held leases, release those above the fair share, take free or
-- expired ones up to it (G4, G11, G15). Returns the partitions the subscriber holds after the tick.
{# The live members of the group's topic, each with the partitions it holds (a lease nobody took
    over is still its holder's, expired or not: its next tick renews it) and its place in the
    fair share: most partitions first, then by name. The first (P mod S) places hold one more, so
    the members that already hold the most keep the extra partitions and a rebalance moves only
    what fair share needs (G15). #}
{% macro ranked_members() -%}
(
        SELECT
            mh.m_name,
            mh.m_held,
            ROW_NUMBER() OVER (ORDER BY mh.m_held DESC, mh.m_name) AS m_place
        FROM (
            SELECT
                h.subscriber AS m_name,
                COUNT(l.partition_id) AS m_held
            FROM queue_subscriber_heartbeats AS h
            LEFT JOIN queue_partition_leases AS l
                ON h.group_name = l.group_name AND h.topic = l.topic AND h.subscriber = l.leased_by
            WHERE h.group_name = v_group AND h.topic = v_topic AND h.expires_at > v_now
            GROUP BY h.subscriber
        ) AS mh
    )
{%- endmacro %}
CREATE PROCEDURE queue_acquire_leases(
    IN p_group {{ m.name_param() }},
    IN p_topic {{ m.name_param() }},
    IN p_subscriber {{ m.name_param() }},
    IN p_lease_ms BIGINT,
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT {{ m.now_ms('p_now') }};
    DECLARE v_group {{ m.name_local() }};
    DECLARE v_topic {{ m.name_local() }};
    DECLARE v_subscriber {{ m.name_local() }};
    DECLARE v_live INT;
    DECLARE v_place INT;
    DECLARE v_total INT;
    DECLARE v_floor INT;
    DECLARE v_extra INT;
    DECLARE v_quota INT;
    DECLARE v_held INT;
    DECLARE v_x BIGINT;
    DECLARE v_missing {{ m.text('LONGTEXT') }};
    {{ m.own_transaction_handler() }};

    {{ m.check_identifier('p_group') }};
    {{ m.check_identifier('p_topic') }};
    {{ m.check_name('p_subscriber') }};
    {{ m.check_ms('p_lease_ms', low=1, allow_null=False) }};
    {{ m.check_now() }};
    {{ m.check_consumer() }};
    SET v_group = p_group;
    SET v_topic = p_topic;
    SET v_subscriber = p_subscriber;

    -- READ COMMITTED: every read after the subscription row lock sees the latest ticks, and no
    -- gap locks reach the partitions publishers are creating
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    -- lease ticks of one group's topic take turns on the subscription row: no lease deadlocks,
    -- and every tick sees the others' results when it computes its share
    SET v_live = 0;
    SELECT COUNT(*) INTO v_live FROM queue_subscriptions AS s
    WHERE s.group_name = v_group AND s.topic = v_topic
    FOR UPDATE;
    IF v_live = 0 THEN
        {{ m.fail(m.E_NOT_SUBSCRIBED, 'p_group is not subscribed to p_topic: call queue_subscribe first') }};
    END IF;
    INSERT INTO queue_subscriber_heartbeats (
        group_name, topic, subscriber, started_at, heartbeat_at, expires_at
    ) VALUES (v_group, v_topic, v_subscriber, v_now, v_now, v_now + p_lease_ms)
    ON DUPLICATE KEY UPDATE heartbeat_at = v_now, expires_at = v_now + p_lease_ms;

    -- a lease row for every partition of the topic that has none yet in this group, found by a
    -- plain read so that the tick never waits on a publisher holding a sequence row
    SELECT JSON_ARRAYAGG(p.partition_id) INTO v_missing
    FROM queue_partitions AS p
    LEFT JOIN queue_partition_leases AS l ON l.group_name = v_group AND p.partition_id = l.partition_id
    WHERE p.topic = v_topic AND l.partition_id IS NULL;
    IF v_missing IS NOT NULL THEN
        INSERT IGNORE INTO queue_partition_leases (group_name, partition_id, topic, lease_epoch, expires_at)
        SELECT
            v_group,
            x.x_pid,
            v_topic,
            0,
            0
        FROM JSON_TABLE(v_missing, '$[*]' COLUMNS (x_pid BIGINT PATH '$')) AS x;
    END IF;

    -- renew: a lease nobody took over is still ours, even past its expiry
    UPDATE queue_partition_leases
    SET renewed_at = v_now, expires_at = v_now + p_lease_ms
    WHERE group_name = v_group AND topic = v_topic AND leased_by = v_subscriber;
    SELECT COUNT(*) INTO v_held
    FROM queue_partition_leases AS l
    WHERE l.group_name = v_group AND l.topic = v_topic AND l.leased_by = v_subscriber;

    -- fair share (G11) and stickiness (G15): with P partitions and S live members, the members
    -- in the first (P mod S) places hold ceil(P/S), the others floor(P/S)
    SELECT COUNT(*) INTO v_total
    FROM queue_partition_leases AS l
    WHERE l.group_name = v_group AND l.topic = v_topic;
    SELECT
        COUNT(*),
        MAX(IF(r.m_name = v_subscriber, r.m_place, NULL))
    INTO v_live, v_place
    FROM {{ ranked_members() }} AS r;
    SET v_floor = FLOOR(v_total / v_live);
    SET v_extra = v_total MOD v_live;
    SET v_quota = v_floor + IF(v_place <= v_extra, 1, 0);

    -- above the share: give back the highest partitions
    WHILE v_held > v_quota DO
        SELECT MAX(l.partition_id) INTO v_x
        FROM queue_partition_leases AS l
        WHERE l.group_name = v_group AND l.topic = v_topic AND l.leased_by = v_subscriber;
        UPDATE queue_partition_leases
        SET leased_by = NULL, lease_epoch = lease_epoch + 1, expires_at = 0, renewed_at = v_now
        WHERE group_name = v_group AND partition_id = v_x;
        SET v_held = v_held - 1;
    END WHILE;

    -- below the share: take, lowest partitions first, a free lease or an expired one whose holder
    -- is no longer live; only then an expired lease of a live member that holds more than its own
    -- share (it would give that one back on its next tick): a member that is late renewing what is
    -- within its share keeps it
    take_loop: WHILE v_held < v_quota DO
        SET v_x = NULL;
        SELECT MIN(l.partition_id) INTO v_x
        FROM queue_partition_leases AS l
        WHERE
            l.group_name = v_group AND l.topic = v_topic
            AND (
                l.leased_by IS NULL
                OR (
                    l.expires_at <= v_now AND NOT EXISTS (
                        SELECT 1 FROM queue_subscriber_heartbeats AS h
                        WHERE
                            h.group_name = v_group AND h.topic = v_topic AND h.subscriber = l.leased_by
                            AND h.expires_at > v_now
                    )
                )
            );
        IF v_x IS NULL THEN
            SELECT MIN(l.partition_id) INTO v_x
            FROM queue_partition_leases AS l
            INNER JOIN {{ ranked_members() }} AS r ON l.leased_by = r.m_name
            WHERE
                l.group_name = v_group AND l.topic = v_topic AND l.expires_at <= v_now
                AND r.m_held > v_floor + IF(r.m_place <= v_extra, 1, 0);
        END IF;
        IF v_x IS NULL THEN
            LEAVE take_loop;
        END IF;
        UPDATE queue_partition_leases
        SET
            leased_by = v_subscriber, lease_epoch = lease_epoch + 1, leased_at = v_now,
            renewed_at = v_now, expires_at = v_now + p_lease_ms
        WHERE
            group_name = v_group AND partition_id = v_x
            AND (leased_by IS NULL OR expires_at <= v_now);
        IF ROW_COUNT() = 0 THEN
            LEAVE take_loop;
        END IF;
        SET v_held = v_held + 1;
    END WHILE;
    COMMIT;

    SELECT
        l.partition_id,
        l.topic,
        IF(p.slot < 0, p.partition_key, NULL) AS partition_key,
        p.slot,
        l.lease_epoch,
        l.expires_at
    FROM queue_partition_leases AS l
    INNER JOIN queue_partitions AS p ON l.partition_id = p.partition_id
    WHERE l.group_name = v_group AND l.topic = v_topic AND l.leased_by = v_subscriber
    ORDER BY l.partition_id;
END
