"""The scripted planner outside its first settings: doors, full hands, TextWorld's prose, failures.

Hand-written texts in the engines' own phrasings (CookingWorld at the engine's defaults, TextWorld's
cooking games); each test would fail with the reader or planner of the door-less kitchens.
"""
from brainmem_ros.planning.base import PlanningContext
from brainmem_ros.planning.reading import Event, read_belief
from brainmem_ros.planning.scripted import ScriptedPlanner

RECIPE = ("Ingredients:\n  carrot\n  pork chop\n\nDirections:\n  chop the pork chop\n"
          "  fry the carrot\n  prepare meal\n\n")
TW_KITCHEN = (
    "-= Kitchen =-\nYou have come into the most standard of all possible kitchens.\n\n"
    "You make out a closed oven. You can make out a table. On the table you can see a cookbook "
    "and a knife. You see a raw carrot on the counter.\n\n"
    "There is a closed plain door leading north. There is an exit to the south. Don't worry, there "
    "is no door.")


def _decide(observation, valid, window=(), task="You are hungry! Cook a meal in the kitchen."):
    planner = ScriptedPlanner(0)
    return planner.decide(PlanningContext(task, observation, valid, list(window), ""))


def test_textworld_prose_gives_the_room_its_ways_a_named_closed_door_and_what_lies_where():
    b = read_belief("t", [Event(RECIPE), Event(TW_KITCHEN)], wanted=["knife"])
    assert b.room == "kitchen"
    assert b.exits["kitchen"] == {"north": None, "south": None}  # rooms learnt by going
    assert b.shut["kitchen"] == {"north"} and b.doors["kitchen"] == {"north": "plain door"}
    assert b.where["knife"] == ("kitchen", "table") and b.where["carrot"] == ("kitchen", "counter")
    assert b.closed["kitchen"] == {"oven"}


def test_going_a_way_links_both_rooms_and_the_door_opened_by_its_name_is_open():
    corridor = "-= Corridor =-\nYou arrive in a corridor.\n\nThere is an exit to the north."
    b = read_belief("t", [
        Event(TW_KITCHEN),
        Event("You open plain door.", action="open plain door"),
        Event(corridor, action="go north"),
    ])
    assert b.exits["kitchen"]["north"] == "corridor" and b.exits["corridor"]["south"] == "kitchen"
    assert b.shut["kitchen"] == set()


def test_taking_the_pork_chop_does_not_chop_it():
    b = read_belief("t", [Event(RECIPE), Event("You take the pork chop from the fridge.",
                                               action="take pork chop from fridge")])
    assert not b.step_done("chop the pork chop")
    b = read_belief("t", [Event(RECIPE), Event("You chop the pork chop.", action="chop pork chop")])
    assert b.step_done("chop the pork chop")


def test_the_only_way_out_behind_a_closed_door_is_opened_by_its_name():
    valid = ["examine table", "inventory", "look", "open plain door"]
    room = TW_KITCHEN.replace(" There is an exit to the south. Don't worry, there is no door.", "")
    assert _decide(room, valid) == "open plain door"


def test_a_cookingworld_door_is_opened_before_walking_into_it():
    room = ("You are in the kitchen. In one part of the room you see a stove. \n"
            "To the North you see a closed plain door. ")
    valid = ["look around", "move north", "open door to north", "inventory"]
    assert _decide(room, valid) == "open door to north"


def test_with_full_hands_the_planner_puts_down_what_the_plan_needs_last():
    full = "Your inventory currently has 2 items, and is full.  You can't pick up another item."
    window = [("", "You are in the kitchen. In one part of the room you see a counter that has a "
                   "raw pork chop on it. "),
              ("read cookbook", RECIPE),
              ("take carrot", "You take the carrot."),
              ("take knife", "You take the knife."),
              ("take pork chop", full)]
    valid = ["take pork chop", "put carrot in counter", "put knife in counter", "move north",
             "chop carrot", "look around"]
    # chop the pork chop needs the pork chop and the knife: the carrot goes down, not the knife
    assert _decide(full, valid, window) == "put carrot in counter"


def test_the_meal_is_not_prepared_while_an_ingredient_is_on_the_floor():
    window = [("", TW_KITCHEN), ("examine cookbook", RECIPE),
              ("chop pork chop with knife", "You chop the pork chop."),
              ("cook carrot with stove", "You fried the carrot."),
              ("drop carrot", "You drop the carrot on the ground."),
              ("look", TW_KITCHEN.replace(" You see a raw carrot on the counter.", "")
               + "\n\nThere is a carrot on the floor.")]
    valid = ["prepare meal", "take carrot", "drop pork chop", "drop knife", "look"]
    assert _decide(window[-1][1], valid, window) == "take carrot"


def test_a_failure_in_new_words_still_orders_the_plan():
    plan = "Directions:\n  open door\n  arm alarm\n  heat oven\n  put cake in oven\n\n"
    b = read_belief("t", [
        Event(plan),
        Event("You put the cake in the oven before the oven was heated. It stays raw.",
              action="put cake in oven", failed=True),
        Event("You arm the alarm while the door is open. It rings.", action="arm alarm",
              failed=True),
    ])
    assert b.plan.index("heat oven") < b.plan.index("put cake in oven")
    assert b.plan.index("arm alarm") < b.plan.index("open door")


def test_a_remembered_move_says_where_it_was_taken_and_links_the_rooms():
    from brainmem_ros.core.prompt import TaskState, render
    from brainmem_ros.core.trace import Entry, Recall, Zone
    from brainmem_ros.planning.reading import memory_events

    went = Entry(agent_id="r", zone=Zone.EPISODIC, content="go north: -= Corridor =-\nYou arrive.",
                 embedding=None, created=90.0, location="kitchen")
    unplaced = Entry(agent_id="r", zone=Zone.EPISODIC, content="go west: -= Pantry =-",
                     embedding=None, created=95.0)
    recalls = [Recall(e, 1.0, 1.0, ["vector"], 0.5) for e in (went, unplaced)]
    prompt = render(recalls, [], TaskState(), 100.0)
    assert "- 10 s ago (kitchen): go north: -= Corridor =-" in prompt
    assert "- just now: go west: -= Pantry =-" in prompt  # no place known, none said
    b = read_belief("t", memory_events(prompt))
    assert b.exits["kitchen"]["north"] == "corridor" and b.exits["corridor"]["south"] == "kitchen"
    assert "pantry" not in {r for ways in b.exits.values() for r in ways.values()}


def test_a_shown_step_is_never_taken_from_a_room_only_a_memory_was_in():
    """The memory of arriving in the bathroom is not where the next shown "go north" started."""
    recalled = Event("-= Bathroom =-\nYou arrive in a bathroom.\n\nThere is an exit to the east.",
                     action="go west", recalled=True, place="corridor")
    b = read_belief("t", [recalled, Event("-= Corridor =-\nA corridor.\n\nThere is an exit to "
                                          "the north.", action="go north")])
    assert b.exits["corridor"]["west"] == "bathroom" and b.exits["bathroom"] == {"east": "corridor"}
    assert b.room == "corridor"


def test_a_way_seen_before_it_was_gone_through_learns_where_it_leads():
    b = read_belief("t", [
        Event("-= Corridor =-\nA corridor.\n\nThere is an exit to the south and one to the west."),
        Event("-= Bathroom =-\nA bathroom.\n\nThere is an exit to the east.", action="go west"),
    ])
    assert b.exits["bathroom"]["east"] == "corridor"


def test_a_door_walked_into_counts_before_the_shown_steps_have_said_the_room():
    """The last K steps may not include the room's description: the closed door still counts."""
    closed = "You can't move there, the door is closed."
    b = read_belief("t", [Event(closed, action="move east")])
    assert "east" in b.shut.get(b.room, set())
