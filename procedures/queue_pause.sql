{% import '_pause.sql' as pause %}
-- Pauses a group on a topic, or with p_group NULL the topic for every group (admin, operator):
-- fetch then delivers nothing, while leases, heartbeats, settles and publishing go on.
CREATE PROCEDURE queue_pause(
    {{ pause.set_paused_params() }}
)
{{ pause.set_paused_body(1) }}
