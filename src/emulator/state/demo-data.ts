/**
 * The demo store's menu: what a newcomer sees mirrored after `npm start`. Prices are in pence and
 * cents (GBP and EUR); traits refer to options by title within the trait.
 */
export interface DemoMenu {
  traits: {
    title: string;
    description: string;
    required: boolean;
    allow_multiple: boolean;
    options: [string, number][];
  }[];
  collections: { title: string; description: string; products: [string, string, number, string[]][] }[];
}

export const DEMO_MENU: DemoMenu = {
  traits: [
    {
      title: 'Size',
      description: 'How big',
      required: true,
      allow_multiple: false,
      options: [
        ['Small', -50],
        ['Regular', 0],
        ['Large', 70],
      ],
    },
    {
      title: 'Milk',
      description: 'Which milk',
      required: false,
      allow_multiple: false,
      options: [
        ['Whole', 0],
        ['Oat', 40],
        ['Soy', 40],
        ['Skimmed', 0],
      ],
    },
    {
      title: 'Extra toppings',
      description: 'Add as many as you like',
      required: false,
      allow_multiple: true,
      options: [
        ['Cheese', 90],
        ['Bacon', 150],
        ['Avocado', 180],
        ['Fried egg', 120],
      ],
    },
    {
      title: 'Cooking',
      description: 'How it is cooked',
      required: true,
      allow_multiple: false,
      options: [
        ['Medium rare', 0],
        ['Medium', 0],
        ['Well done', 0],
      ],
    },
    {
      title: 'Bread',
      description: 'Choice of bread',
      required: false,
      allow_multiple: false,
      options: [
        ['White', 0],
        ['Sourdough', 60],
        ['Gluten free', 90],
      ],
    },
    {
      title: 'Spice level',
      description: 'How hot',
      required: false,
      allow_multiple: false,
      options: [
        ['Mild', 0],
        ['Medium', 0],
        ['Hot', 0],
      ],
    },
  ],
  collections: [
    {
      title: 'Breakfast',
      description: 'Served until 11:30',
      products: [
        ['Full English', 'Eggs, bacon, sausage, beans, mushrooms and toast', 1150, ['Bread', 'Extra toppings']],
        ['Avocado toast', 'Smashed avocado, chilli and lime on toast', 850, ['Bread', 'Extra toppings']],
        ['Eggs Benedict', 'Poached eggs, ham and hollandaise on a muffin', 950, ['Extra toppings']],
        ['Porridge', 'Oats with honey and berries', 600, ['Milk']],
        ['Pancake stack', 'Three pancakes with maple syrup', 800, ['Extra toppings']],
        ['Granola bowl', 'Granola, yoghurt and seasonal fruit', 650, ['Milk']],
        ['Bacon roll', 'Smoked bacon in a soft roll', 550, ['Bread']],
      ],
    },
    {
      title: 'Mains',
      description: 'From noon',
      products: [
        ['Classic burger', 'Beef patty, lettuce, tomato and pickles', 1350, ['Cooking', 'Extra toppings', 'Bread']],
        ['Chicken burger', 'Buttermilk chicken, slaw and mayo', 1250, ['Spice level', 'Extra toppings']],
        ['Veggie burger', 'Black bean patty with chipotle mayo', 1150, ['Spice level', 'Extra toppings']],
        ['Steak frites', 'Sirloin with fries and peppercorn sauce', 2200, ['Cooking']],
        ['Fish and chips', 'Beer-battered haddock, chips and peas', 1500, []],
        ['Chicken curry', 'Slow-cooked with rice', 1300, ['Spice level', 'Size']],
        ['Margherita pizza', 'Tomato, mozzarella and basil', 1100, ['Size', 'Extra toppings']],
        ['Caesar salad', 'Romaine, parmesan, croutons', 950, ['Extra toppings']],
        ['Mushroom risotto', 'Arborio rice with wild mushrooms', 1250, []],
        ['Pulled pork wrap', 'BBQ pork with slaw', 1050, ['Spice level']],
      ],
    },
    {
      title: 'Sides',
      description: 'To share, or not',
      products: [
        ['Fries', 'Skin-on fries', 400, ['Size']],
        ['Sweet potato fries', 'With smoked salt', 450, ['Size']],
        ['Onion rings', 'Beer-battered', 450, []],
        ['Side salad', 'Leaves, cucumber and vinaigrette', 350, []],
        ['Garlic bread', 'With or without cheese', 400, ['Extra toppings']],
        ['Coleslaw', 'House-made', 300, []],
      ],
    },
    {
      title: 'Drinks',
      description: 'Hot and cold',
      products: [
        ['Flat white', 'Double ristretto with steamed milk', 340, ['Milk', 'Size']],
        ['Cappuccino', 'With cocoa on top', 320, ['Milk', 'Size']],
        ['Latte', 'Espresso with lots of milk', 330, ['Milk', 'Size']],
        ['Tea', 'English breakfast', 250, ['Milk']],
        ['Fresh orange juice', 'Squeezed to order', 350, ['Size']],
        ['Lemonade', 'House-made, lightly sparkling', 300, ['Size']],
        ['Hot chocolate', 'With whipped cream', 360, ['Milk', 'Size']],
      ],
    },
  ],
};

/** EUR prices follow GBP at a fixed demo rate. */
export function demoPrices(pence: number): Record<string, number> {
  return { GBP: pence, EUR: Math.round((pence * 1.15) / 10) * 10 };
}
