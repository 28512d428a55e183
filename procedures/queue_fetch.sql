{% import '_macros.sql' as m %}
-- Delivers up to p_batch_size in-flight messages per partition the caller holds, in offset order,
-- highest priority first: marks them delivered and returns them with attempt and token (G4, G6, G7).
CREATE PROCEDURE queue_fetch(
    IN p_group {{ m.name_param() }},
    IN p_topic {{ m.name_param() }},
    IN p_subscriber {{ m.name_param() }},
    IN p_batch_size BIGINT,
    IN p_visibility_ms BIGINT,
    IN p_max_messages BIGINT,
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    {{ m.check_identifier('p_group') }};
    {{ m.check_identifier('p_topic') }};
    {{ m.check_name('p_subscriber') }};
    {{ m.check_fetch_args() }};
    -- (in a transaction of its own: call it with none open)
    CALL queue__fetch(p_group, p_topic, p_subscriber, p_batch_size, p_visibility_ms, p_max_messages, p_now, 0);
END
