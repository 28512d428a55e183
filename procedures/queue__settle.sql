{% import '_macros.sql' as m %}
-- Applies one outcome to a list of deliveries [[partition_id, offset, token], ...] in its own
-- transaction; a stale token is counted and left alone (G4). Returns (settled, stale, dead_lettered).
CREATE PROCEDURE queue__settle(
    IN p_group {{ m.name_local() }},
    IN p_deliveries {{ m.text('LONGTEXT') }},
    -- the outcome, one of the ACTION_* codes of _macros.sql
    IN p_action TINYINT,
    IN p_ms BIGINT,
    IN p_error {{ m.text('TEXT') }},
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_settled INT;
    DECLARE v_stale INT;
    DECLARE v_dead INT;
    {{ m.own_transaction_handler() }};

    -- READ COMMITTED: the offsets row lock orders every writer of a partition's delivery state,
    -- so plain reads after it are current, and no gap locks reach neighbouring partitions
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    CALL queue__settle_apply(
        p_group, p_deliveries, p_action, p_ms, p_error, p_now, 0, v_settled, v_stale, v_dead
    );
    COMMIT;

    SELECT
        v_settled AS settled,
        v_stale AS stale,
        v_dead AS dead_lettered;
END
