{% import '_macros.sql' as m %}
-- Cancels a message (topic, key, id) not yet delivered, for one group or every group subscribed
-- to its topic: never delivered there, passed by the watermark. Returns one row (cancelled).
CREATE PROCEDURE queue_cancel(
    IN p_topic {{ m.name_param() }},
    IN p_partition_key {{ m.name_param() }},
    IN p_message_id {{ m.name_param() }},
    -- NULL: every group subscribed to p_topic
    IN p_group {{ m.name_param() }}
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT {{ m.now_ms('NULL') }};
    DECLARE v_topic {{ m.name_local() }};
    DECLARE v_key {{ m.name_local() }};
    DECLARE v_id {{ m.name_local() }};
    DECLARE v_group {{ m.name_local() }};
    DECLARE v_one {{ m.name_local() }};
    DECLARE v_target {{ m.name_local() }};
    DECLARE v_pid BIGINT;
    DECLARE v_off BIGINT;
    DECLARE v_wm BIGINT;
    DECLARE v_cpos BIGINT;
    DECLARE v_state INT;
    DECLARE v_done INT DEFAULT 0;
    DECLARE v_found INT DEFAULT 0;
    DECLARE v_groups INT DEFAULT 0;
    -- per outcome, over every (message, group): cancelled, in flight, already done, meant for
    -- another group (a redriven copy)
    DECLARE v_cancelled INT DEFAULT 0;
    DECLARE v_in_flight INT DEFAULT 0;
    DECLARE v_settled INT DEFAULT 0;
    DECLARE v_other INT DEFAULT 0;
    -- the message: one row for a key; without a key, the id's row in each hashed slot (its
    -- priority's, or another's for a copy published under another partition count or priority),
    -- by the log's unique (partition_id, message_id) index. Plain reads: they never wait on a
    -- publisher, and a message whose publish has not committed is not there yet
    DECLARE c_messages CURSOR FOR
        SELECT
            p.partition_id,
            msg.msg_offset,
            msg.target_group
        FROM queue_partitions AS p
        INNER JOIN queue_messages AS msg ON p.partition_id = msg.partition_id AND msg.message_id = v_id
        WHERE
            p.topic = v_topic AND p.partition_key = v_key
            AND IF(p_partition_key IS NULL, p.slot >= 0, p.slot = {{ m.SLOT_KEYED }})
        ORDER BY p.partition_id, msg.msg_offset;
    -- the groups, in name order (the order every cancel locks their offsets rows in)
    DECLARE c_groups CURSOR FOR
        SELECT s.group_name FROM queue_subscriptions AS s
        WHERE s.topic = v_topic AND (v_one IS NULL OR s.group_name = v_one)
        ORDER BY s.group_name;
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
    {{ m.own_transaction_handler() }};

    {{ m.check_identifier('p_topic') }};
    {{ m.check_optional_name('p_partition_key') }};
    {{ m.check_name('p_message_id') }};
    IF p_group IS NOT NULL THEN
        {{ m.check_identifier('p_group') }};
    END IF;
    -- whoever may publish to the topic may cancel its undelivered messages; a named group must
    -- also be one the account may use
    {{ m.check_acl('publish', 'p_topic', 'this topic') }};
    IF p_group IS NOT NULL THEN
        {{ m.check_acl('group', 'p_group', 'this group') }};
    END IF;
    SET v_topic = p_topic;
    SET v_key = COALESCE(p_partition_key, '');
    SET v_id = p_message_id;
    SET v_one = p_group;
    IF v_one IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM queue_subscriptions AS s
        WHERE s.group_name = v_one AND s.topic = v_topic
    ) THEN
        {{ m.fail(m.E_NOT_SUBSCRIBED, 'p_group is not subscribed to p_topic') }};
    END IF;

    -- READ COMMITTED: the offsets row lock orders every writer of a partition's delivery state,
    -- so plain reads after it are current, and no gap locks reach neighbouring partitions
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    OPEN c_messages;
    message_loop: LOOP
        SET v_done = 0;
        FETCH c_messages INTO v_pid, v_off, v_target;
        IF v_done = 1 THEN
            LEAVE message_loop;
        END IF;
        SET v_found = v_found + 1;
        SET v_groups = 0;
        BEGIN
            DECLARE v_gdone INT DEFAULT 0;
            DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_gdone = 1;
            OPEN c_groups;
            group_loop: LOOP
                SET v_gdone = 0;
                FETCH c_groups INTO v_group;
                IF v_gdone = 1 THEN
                    LEAVE group_loop;
                END IF;
                SET v_groups = v_groups + 1;
                IF v_target IS NOT NULL AND v_target <> v_group THEN
                    -- a redriven copy for another group: this group never receives it
                    SET v_other = v_other + 1;
                    ITERATE group_loop;
                END IF;
                -- a group that never read the partition gets its position first (as its first
                -- fetch would: just before the oldest retained message)
                CALL queue__open_offsets(v_group, v_pid, v_now);
                SELECT
                    o.offset_acked,
                    o.cursor_pos
                INTO v_wm, v_cpos
                FROM queue_offsets AS o
                WHERE o.group_name = v_group AND o.partition_id = v_pid
                FOR UPDATE;
                SET v_state = NULL;
                IF v_off > v_wm THEN
                    SELECT MAX(s.state) INTO v_state FROM queue_delivery_state AS s
                    WHERE s.group_name = v_group AND s.partition_id = v_pid AND s.msg_offset = v_off;
                END IF;
                IF v_off <= v_wm OR v_state >= {{ m.STATE_ACKED }} THEN
                    -- acked, dead-lettered, cancelled before, or behind the group's position
                    SET v_settled = v_settled + 1;
                ELSEIF v_state = {{ m.STATE_IN_FLIGHT }} OR (v_state IS NULL AND v_off <= v_cpos) THEN
                    -- a redelivery, or a message of the cursor batch: it finishes normally
                    SET v_in_flight = v_in_flight + 1;
                ELSE
                    IF v_state = {{ m.STATE_WAITING }} THEN
                        -- delayed, nacked awaiting its retry, or released: not delivered again yet
                        UPDATE queue_delivery_state
                        SET state = {{ m.STATE_CANCELLED }}, invisible_until = 0, token = 0, updated_at = v_now
                        WHERE group_name = v_group AND partition_id = v_pid AND msg_offset = v_off;
                    ELSE
                        -- past the cursor, never delivered: the row fetch will skip
                        INSERT INTO queue_delivery_state (
                            group_name, partition_id, msg_offset, state, invisible_until, attempts, token,
                            last_error, updated_at
                        ) VALUES (
                            v_group, v_pid, v_off, {{ m.STATE_CANCELLED }}, 0, 0, 0, NULL, v_now
                        );
                    END IF;
                    UPDATE queue_offsets SET cancelled = cancelled + 1
                    WHERE group_name = v_group AND partition_id = v_pid;
                    -- the next offset: the watermark (and the cursor) pass it and what follows
                    CALL queue__advance_watermark(v_group, v_pid, v_wm, NULL, 1, v_now);
                    SET v_cancelled = v_cancelled + 1;
                END IF;
            END LOOP;
            CLOSE c_groups;
        END;
    END LOOP;
    CLOSE c_messages;

    -- nothing cancelled: the error rolls back the positions opened above
    -- (MySQL takes at most 128 characters of MESSAGE_TEXT)
    IF v_found = 0 THEN
        {{ m.fail(m.E_NOTHING_TO_CANCEL, 'p_message_id has nothing to cancel: no such message in p_topic under p_partition_key (or not committed, or removed by GC)') }};  -- noqa: LT05
    ELSEIF v_groups = 0 THEN
        {{ m.fail(m.E_NOTHING_TO_CANCEL, 'p_message_id has nothing to cancel: no group is subscribed to p_topic') }};
    ELSEIF v_cancelled = 0 AND v_one IS NULL THEN
        {{ m.fail(m.E_NOTHING_TO_CANCEL, 'p_message_id has nothing to cancel: the message is in flight or done for every group subscribed to p_topic') }};  -- noqa: LT05
    ELSEIF v_cancelled = 0 AND v_in_flight > 0 THEN
        {{ m.fail(m.E_NOTHING_TO_CANCEL, 'p_message_id has nothing to cancel for p_group: the message is in flight (delivered, not settled)') }};  -- noqa: LT05
    ELSEIF v_cancelled = 0 AND v_settled > 0 THEN
        {{ m.fail(m.E_NOTHING_TO_CANCEL, 'p_message_id has nothing to cancel for p_group: the message is already done (acked, dead-lettered or cancelled)') }};  -- noqa: LT05
    ELSEIF v_cancelled = 0 THEN
        {{ m.fail(m.E_NOTHING_TO_CANCEL, 'p_message_id has nothing to cancel for p_group: the message is a redriven copy for another group') }};  -- noqa: LT05
    END IF;
    COMMIT;

    SELECT v_cancelled AS cancelled;
END
