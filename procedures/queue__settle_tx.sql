{% import '_macros.sql' as m %}
-- Applies one outcome inside the caller's transaction, never committing it: the handler's writes and
-- the settle commit together or not at all. A stale delivery raises MQ019 and undoes the call.
CREATE PROCEDURE queue__settle_tx(
    IN p_group {{ m.name_local() }},
    IN p_deliveries {{ m.text('LONGTEXT') }},
    -- the outcome, one of the ACTION_* codes of _macros.sql (ack, nack, dead-letter)
    IN p_action TINYINT,
    IN p_ms BIGINT,
    IN p_error {{ m.text('TEXT') }},
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN  -- noqa: LT02
    DECLARE v_settled INT;  -- noqa: PRS,LT02
    DECLARE v_stale INT;
    DECLARE v_dead INT;
    DECLARE v_own_transaction INT DEFAULT 0;
    DECLARE v_error {{ m.text('VARCHAR(128)') }};
    {{ m.savepoint_transaction_handler('mysqlq_settle') }};

    {{ m.begin_unless_in_transaction('mysqlq_settle') }};
    CALL queue__settle_apply(
        p_group, p_deliveries, p_action, p_ms, p_error, p_now, 1 - v_own_transaction,
        v_settled, v_stale, v_dead
    );
    IF v_stale > 0 THEN
        -- the message went to someone else (redelivered, seeked over or settled): the caller's
        -- writes must not commit as if this delivery were theirs. The handler undoes this call
        SET v_error = CONCAT(
            '{{ m.E_STALE }} p_deliveries holds ', v_stale, ' stale deliveries: nothing was settled;',
            ' roll back your transaction'
        );
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_error;
    END IF;
    {{ m.commit_if_own_transaction('mysqlq_settle') }};

    SELECT
        v_settled AS settled,
        v_stale AS stale,
        v_dead AS dead_lettered;
END
