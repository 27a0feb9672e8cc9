"""Skill induction's rules on programs read off real trees: which goal literals become
parameters, and which episodes give no skill."""

from __future__ import annotations

from linewise.apps.skills.induce import induce_skills
from linewise.locators import TreeIndex
from linewise.records import TargetLocator
from linewise.runtime.replay.program import Program, ProgramStep
from linewise.runtime.replay.skill import SkillLibrary

TABS = ["RootWebArea 'Tabs'", "\ttablist ''", "\t\t[11] tab 'Tab #1'", "\t\t[12] tab 'Tab #2'",
        "\t\t[13] tab 'Tab #3'"]
FORM = ["RootWebArea 'Form'", "\t[20] paragraph ''", "\t\tStaticText 'Find the word'",
        "\t[21] textbox ''", "\t[22] button 'Submit'"]


def _program(task: str, seed: int, goal: str, steps: list[tuple[str, TargetLocator | None]]
             ) -> Program:
    return Program(
        source=f"runs/{task}.seed{seed}", task={"id": f"{task}.seed{seed}", "miniwob": task,
                                                "seed": seed},
        task_id=f"miniwob.{task}.seed{seed}", goal=goal,
        steps=[ProgramStep(index=i, action=action, targets=[t] if t else [])
               for i, (action, t) in enumerate(steps)])


def _tab(number: int) -> TargetLocator:
    index = TreeIndex(TABS)
    found = index.locate(f"1{number}")
    assert found is not None
    return found


def test_a_word_of_an_element_name_is_a_parameter_and_offered_only_to_its_template() -> None:
    [skill] = induce_skills([_program("click-tab", 0, "Click on Tab #2.",
                                      [("click('12')", _tab(2))])])
    assert [p.name for p in skill.parameters] == ["tab"]
    assert skill.steps[0].targets[0].name == "Tab {{tab}}"
    program = skill.bind({"tab": "#3"})
    assert program.steps[0].targets[0].name == "Tab #3"
    library = SkillLibrary([skill])
    assert [s.name for s in library.offered("Click on Tab #3.", TABS)] == ["click_tab"]
    assert library.offered("Click on the Submit button.", TABS) == []


def test_text_read_off_the_page_and_typed_once_gives_no_skill() -> None:
    index = TreeIndex(FORM)
    box, submit = index.locate("21"), index.locate("22")
    goal = 'Find the 3rd word in the paragraph, type that into the textbox and press "Submit".'
    one = _program("find-word", 0, goal, [("fill('21', 'lorem')", box),
                                          ("click('22')", submit)])
    assert induce_skills([one]) == []


def test_a_word_all_goals_share_is_no_parameter_and_one_that_varies_is() -> None:
    index = TreeIndex(FORM)
    box, submit = index.locate("21"), index.locate("22")
    programs = [
        _program("enter-text-2", seed, f"Type {name} in the box and press Submit.",
                 [(f"fill('21', '{name}')", box), ("click('22')", submit)])
        for seed, name in enumerate(["Ann", "Bob", "Cyd"])]
    [skill] = induce_skills(programs)
    # "Type" is a verb, which names nothing: the parameter is a plain value
    assert skill.goal_template == "Type {{value}} in the box and press Submit."
    assert [p.name for p in skill.parameters] == ["value"]
    assert skill.steps[1].targets[0].name == "Submit" and len(skill.provenance) == 3


def _panel(words: list[str], tab: int) -> list[str]:
    """A tab panel of clickable unnamed words, as MiniWoB++'s click-tab-2 shows them."""
    lines = ["RootWebArea 'Click Tab Task'", f"\t[25] tabpanel '{tab}'", "\t\t[26] paragraph ''"]
    for number, word in enumerate(words, start=27):
        lines += [f"\t\t\tStaticText 'filler {number}'", f"\t\t\t[{number}] generic, clickable",
                  f"\t\t\t\tStaticText '{word}'"]
    return lines


def test_where_the_element_stood_is_left_out_and_its_own_words_are_the_parameter() -> None:
    """Three episodes clicked the goal's word in other panels, after other neighbouring
    text: the skill finds the word by its own text on a fourth page, whatever surrounds it."""
    programs = []
    for seed, (words, tab) in enumerate([(["in", "lorem"], 1), (["amet", "nulla", "x"], 2),
                                         (["cras"], 3)]):
        lines, word = _panel(words, tab), words[-1]
        target = TreeIndex(lines).locate(str(26 + len(words)))
        assert target is not None and target.text == word
        programs.append(_program("click-link", seed, f'Click on the link "{word}".',
                                 [(f"click('{26 + len(words)}')", target)]))
    [skill] = induce_skills(programs)
    [step] = skill.steps
    assert skill.goal_template == 'Click on the link "{{link}}".'
    assert (step.targets[0].text, step.targets[0].label, step.targets[0].context) == (
        "{{link}}", None, ())
    fourth = _panel(["dolor", "vel", "porta"], 3)
    bound = skill.bind(skill.arguments_from('Click on the link "vel".') or {})
    assert TreeIndex(fourth).resolve(bound.steps[0].targets[0]).bid == "28"
    assert SkillLibrary([skill]).offered('Click on the link "vel".', fourth) == [skill]


def test_a_field_s_value_in_its_own_form_is_not_checked_for_another_value() -> None:
    """A date typed 02/04/2012 shows 2012-02-04: the skill types another date, so the
    field will show another value, and the recorded one is no effect to check."""
    date = ["RootWebArea 'Enter Date Task'", "\t[16] Date ''", "\t[17] button 'Submit'"]
    index = TreeIndex(date)
    field, submit = index.locate("16"), index.locate("17")
    assert field is not None and submit is not None
    program = _program("enter-date", 0, "Enter 02/04/2012 as the date and hit submit.",
                       [("fill('16', '02/04/2012')", field), ("click('17')", submit)])
    program.steps[0].state_after.append({"value": "2012-02-04"})
    [skill] = induce_skills([program])
    assert skill.steps[0].action == "fill('16', '{{value}}')"
    assert skill.steps[0].state_after == [{}]


def _list_page(chosen: str) -> list[str]:
    """MiniWoB++'s choose-list: a select showing ``chosen``, and a Submit button."""
    options = ["Ertha", "Norfolk Island", "Aurie"]
    return (["RootWebArea 'Choose List Task'",
             f"\t[14] combobox '' value='{chosen}', hasPopup='menu', expanded=False",
             "\t\tMenuListPopup ''"]
            + [f"\t\t\t[{15 + i}] option '{o}', selected={o == chosen}"
               for i, o in enumerate(options)]
            + ["\t[20] button 'Submit'"])


def test_a_value_of_several_words_is_one_parameter_and_an_episode_that_found_it_chosen_agrees(
) -> None:
    """One episode chose "Norfolk Island"; another found "Ertha" already chosen and only
    submitted. The words chosen together are one value, "and" is no word of "Island",
    and the skill is the episode that chose: it fits a goal with a one-word value and
    one with three."""
    chose = TreeIndex(_list_page("Aurie"))
    submitted = TreeIndex(_list_page("Ertha"))
    programs = [
        _program("choose-list", 1, "Select Norfolk Island from the list and click Submit.",
                 [("select_option('14', 'Norfolk Island')", chose.locate("14")),
                  ("click('20')", chose.locate("20"))]),
        _program("choose-list", 0, "Select Ertha from the list and click Submit.",
                 [("click('20')", submitted.locate("20"))]),
    ]
    [skill] = induce_skills(programs)
    assert skill.goal_template == "Select {{value}} from the list and click Submit."
    assert [(p.name, p.example) for p in skill.parameters] == [("value", "Norfolk Island")]
    assert [step.action for step in skill.steps] == ["select_option('14', '{{value}}')",
                                                     "click('20')"]
    for goal, value in (("Select Aurie from the list and click Submit.", "Aurie"),
                        ("Select Isle of Man from the list and click Submit.", "Isle of Man")):
        assert skill.arguments_from(goal) == {"value": value}
    # a single episode: its template holds no placeholder that no argument fills
    [alone] = induce_skills(programs[:1])
    assert alone.goal_template == "Select {{value}} from the list and click Submit."


def _boxes(count: int) -> list[str]:
    """MiniWoB++'s focus-text-2: unnamed textboxes one under another."""
    return ["RootWebArea 'Focus Text Task'"] + [f"\t[{30 + i}] textbox ''"
                                                 for i in range(count)]


def test_an_ordinal_of_the_goal_chooses_among_equal_elements_whatever_their_count() -> None:
    """"The 3rd textbox" names the element by its place among equal ones: the skill's
    parameter is that place, and another page with more boxes still fits."""
    programs = []
    for seed, (nth, place) in enumerate([("1st", 0), ("3rd", 2)]):
        target = TreeIndex(_boxes(3)).locate(str(30 + place))
        assert target is not None and target.matches == 3
        programs.append(_program("focus-text-2", seed, f"Focus into the {nth} input textbox.",
                                 [(f"click('{30 + place}')", target)]))
    [skill] = induce_skills(programs)
    assert skill.goal_template == "Focus into the {{nth}} input textbox."
    assert [(p.name, p.kind) for p in skill.parameters] == [("nth", "ordinal")]
    five = TreeIndex(_boxes(5))
    for goal, bid in (("Focus into the 2nd input textbox.", "31"),
                      ("Focus into the Fifth input textbox.", "34")):
        arguments = skill.arguments_from(goal)
        assert arguments is not None, goal
        assert five.resolve(skill.bind(arguments).steps[0].targets[0]).bid == bid
    assert skill.arguments_from("Focus into the blue input textbox.") is None
    # one episode is enough: the ordinal places the element it acted on
    [alone] = induce_skills(programs[1:])
    assert alone.goal_template == "Focus into the {{nth}} input textbox."


def test_a_value_typed_in_every_episode_is_a_parameter_though_the_goals_agreed() -> None:
    """Two seeds asked for the same text: it is still the goal's to give, so a third
    goal with other text fits. A word only the goal's wording has stays literal."""
    index = TreeIndex(FORM)
    box, submit = index.locate("21"), index.locate("22")
    programs = [_program("enter-text", seed, 'Enter "Ann" in the box and press Submit.',
                         [("fill('21', 'Ann')", box), ("click('22')", submit)])
                for seed in (0, 1)]
    [skill] = induce_skills(programs)
    assert skill.goal_template == 'Enter "{{value}}" in the box and press Submit.'
    assert skill.arguments_from('Enter "Cyd" in the box and press Submit.') == {"value": "Cyd"}


def test_text_read_off_the_page_gives_no_skill_though_two_episodes_agreed_on_it() -> None:
    """Two sums came out 8 and a third 5: the goal never said 8, so it is no step of
    the task. Had all three typed the same text, it would be."""
    index = TreeIndex(FORM)
    box, submit = index.locate("21"), index.locate("22")
    goal = "Solve the math problem and type your answer into the textbox."
    programs = [_program("simple-arithmetic", seed, goal,
                         [(f"fill('21', '{answer}')", box), ("click('22')", submit)])
                for seed, answer in enumerate(["8", "5", "8"])]
    assert induce_skills(programs) == []
    same = [_program("simple-arithmetic", seed, goal,
                     [("fill('21', 'done')", box), ("click('22')", submit)]) for seed in (0, 1)]
    [skill] = induce_skills(same)
    assert skill.steps[0].action == "fill('21', 'done')"


def _choices(role: str, names: list[str]) -> list[str]:
    """MiniWoB++'s click-option (radios) or click-checkboxes (checkboxes), each in its
    label, whose goals both read "Select X and click Submit."."""
    lines = ["RootWebArea 'Choice Task'"]
    for number, name in enumerate(names):
        lines += [f"\t[{40 + 2 * number}] LabelText ''",
                  f"\t\t[{41 + 2 * number}] {role} '{name}'", f"\t\tStaticText '{name}'"]
    return [*lines, "\t[60] button 'Submit'"]


def test_a_skill_is_not_offered_where_its_element_is_there_in_another_role() -> None:
    """Two tasks' goals read alike. The checkbox skill clicks the option's label, then
    its checkbox: on a page of radios its first step would do, and its second fail, so
    it is not offered there; the radio skill is. Neither is offered where the goal's
    option is not on the page."""
    page = {role: TreeIndex(_choices(role, ["ob", "Kx2"])) for role in ("checkbox", "radio")}

    def at(role: str, bid: int) -> TargetLocator:
        found = page[role].locate(str(bid))
        assert found is not None
        return found

    skills = []
    for seed, (n, name) in enumerate([(0, "ob"), (1, "Kx2")]):
        skills += [
            _program("click-checkboxes", seed, f"Select {name} and click Submit.",
                     [(f"click('{40 + 2 * n}')", at("checkbox", 40 + 2 * n)),
                      (f"click('{41 + 2 * n}')", at("checkbox", 41 + 2 * n)),
                      ("click('60')", at("checkbox", 60))]),
            _program("click-option", seed, f"Select {name} and click Submit.",
                     [(f"click('{41 + 2 * n}')", at("radio", 41 + 2 * n)),
                      ("click('60')", at("radio", 60))])]
    induced = induce_skills(skills)
    assert [s.goal_template for s in induced] == ["Select {{value}} and click Submit."] * 2
    assert induced[0].steps[0].targets[0].text == "{{value}}"
    library = SkillLibrary(induced)
    radios = _choices("radio", ["pQ7", "zz"])
    assert [s.name for s in library.offered("Select zz and click Submit.", radios)] == [
        "click_option"]
    assert [s.name for s in library.offered(
        "Select zz and click Submit.", _choices("checkbox", ["zz"]))] == ["click_checkboxes"]
    assert library.offered("Select nope and click Submit.", radios) == []


def test_a_fill_repeated_at_once_is_one_step_and_episodes_that_typed_once_agree() -> None:
    """One episode typed each credential twice (its detour), two typed once: the skill
    types each once and all three agree on it. Two clicks in a row stay two clicks."""
    login = ["RootWebArea 'Login'", "\tLabelText ''", "\t\tStaticText 'Username'",
             "\t[19] textbox ''", "\tLabelText ''", "\t\tStaticText 'Password'",
             "\t[22] textbox ''", "\t[23] button 'Login'"]
    index = TreeIndex(login)
    user, password, button = index.locate("19"), index.locate("22"), index.locate("23")
    programs = []
    for seed, (name, secret, twice) in enumerate([("ann", "x7", True), ("bob", "k2", False),
                                                  ("cyd", "p0", False)]):
        fills = [(f"fill('19', '{name}')", user), (f"fill('22', '{secret}')", password)]
        if twice:
            fills = [fills[0], fills[0], fills[1], fills[1]]
        goal = f'Enter the username "{name}" and the password "{secret}" and press login.'
        programs.append(_program("login-user", seed, goal,
                                 [*fills, ("click('23')", button), ("click('23')", button)]))
    [skill] = induce_skills(programs)
    assert [step.action for step in skill.steps] == [
        "fill('19', '{{username}}')", "fill('22', '{{password}}')", "click('23')",
        "click('23')"]
    assert len(skill.provenance) == 3
